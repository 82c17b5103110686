; C++ tags: derived from tree-sitter-cpp's queries/tags.scm, with C's additions, methods declared
; in class bodies, and namespaces as scopes.

(function_definition declarator: (function_declarator declarator: (identifier) @name)) @definition.function

(function_definition
  declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @definition.function

(function_definition
  declarator: (function_declarator declarator: (qualified_identifier name: (identifier) @name))) @definition.method

(function_definition declarator: (function_declarator declarator: (field_identifier) @name)) @definition.method

(field_declaration declarator: (function_declarator declarator: (field_identifier) @name)) @definition.method

(declaration declarator: (function_declarator declarator: (identifier) @name)) @definition.function

(struct_specifier name: (type_identifier) @name body: (_)) @definition.class

(union_specifier name: (type_identifier) @name body: (_)) @definition.class

(class_specifier name: (type_identifier) @name body: (_)) @definition.class

(enum_specifier name: (type_identifier) @name body: (_)) @definition.type

(type_definition declarator: (type_identifier) @name) @definition.type

(alias_declaration name: (type_identifier) @name) @definition.type

; Include guards (FOO_H, FOO_HPP_, FOO_INCLUDED) are not definitions anyone looks for.
(preproc_def
  name: (identifier) @name
  (#not-match? @name "_(H|HH|HPP|INCLUDED)_*$")) @definition.macro

(preproc_function_def name: (identifier) @name) @definition.macro

(namespace_definition) @scope

(call_expression function: (identifier) @name) @reference.call

(call_expression function: (field_expression field: (field_identifier) @name)) @reference.call

(call_expression function: (qualified_identifier name: (identifier) @name)) @reference.call

(type_identifier) @name @reference.type
