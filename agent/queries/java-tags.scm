; Java tags: derived from tree-sitter-java's queries/tags.scm, plus enums, records and type uses.

(class_declaration name: (identifier) @name) @definition.class

(interface_declaration name: (identifier) @name) @definition.interface

(enum_declaration name: (identifier) @name) @definition.enum

(record_declaration name: (identifier) @name) @definition.class

(method_declaration name: (identifier) @name) @definition.method

(method_invocation name: (identifier) @name) @reference.call

(object_creation_expression type: (type_identifier) @name) @reference.class

(type_list (type_identifier) @name) @reference.implementation

(superclass (type_identifier) @name) @reference.class

(type_identifier) @name @reference.type
