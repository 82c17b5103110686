; C tags: derived from tree-sitter-c's queries/tags.scm. The whole function definition (not just
; its declarator) is the definition, so the map shows the return type; prototypes, macros and
; references (calls, type uses) are added.

(function_definition declarator: (function_declarator declarator: (identifier) @name)) @definition.function

(function_definition
  declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @definition.function

(declaration declarator: (function_declarator declarator: (identifier) @name)) @definition.function

(declaration
  declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @definition.function

(struct_specifier name: (type_identifier) @name body: (_)) @definition.class

(union_specifier name: (type_identifier) @name body: (_)) @definition.class

(enum_specifier name: (type_identifier) @name body: (_)) @definition.type

(type_definition declarator: (type_identifier) @name) @definition.type

; Include guards (FOO_H, FOO_HPP_, FOO_INCLUDED) are not definitions anyone looks for.
(preproc_def
  name: (identifier) @name
  (#not-match? @name "_(H|HH|HPP|INCLUDED)_*$")) @definition.macro

(preproc_function_def name: (identifier) @name) @definition.macro

(call_expression function: (identifier) @name) @reference.call

(call_expression function: (field_expression field: (field_identifier) @name)) @reference.call

(type_identifier) @name @reference.type

(binary_expression (identifier) @name) @reference.variable
