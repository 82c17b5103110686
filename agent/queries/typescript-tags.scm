; TypeScript-only tags: derived from tree-sitter-typescript's queries/tags.scm. This file covers
; only nodes that JavaScript lacks; TypeScript and TSX combine it with javascript-tags.scm.

(function_signature name: (identifier) @name) @definition.function

(method_signature name: (property_identifier) @name) @definition.method

(abstract_method_signature name: (property_identifier) @name) @definition.method

(abstract_class_declaration name: (type_identifier) @name) @definition.class

(module name: (identifier) @name) @definition.module

(interface_declaration name: (type_identifier) @name) @definition.interface

(type_alias_declaration name: (type_identifier) @name) @definition.type

(enum_declaration name: (identifier) @name) @definition.enum

(type_annotation (type_identifier) @name) @reference.type

(generic_type name: (type_identifier) @name) @reference.type

(type_arguments (type_identifier) @name) @reference.type

(extends_clause value: (identifier) @name) @reference.class

(implements_clause (type_identifier) @name) @reference.implementation

(member_expression object: (identifier) @name) @reference.type
