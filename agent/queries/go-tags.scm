; Go tags: derived from tree-sitter-go's queries/tags.scm, plus package-level constants and
; variables and interface methods.

(function_declaration name: (identifier) @name) @definition.function

(method_declaration name: (field_identifier) @name) @definition.method

(type_spec name: (type_identifier) @name) @definition.type

(method_elem name: (field_identifier) @name) @definition.method

(source_file (const_declaration (const_spec name: (identifier) @name) @definition.constant))

(source_file (var_declaration (var_spec name: (identifier) @name) @definition.variable))

(call_expression
  function: [
    (identifier) @name
    (parenthesized_expression (identifier) @name)
    (selector_expression field: (field_identifier) @name)
    (parenthesized_expression (selector_expression field: (field_identifier) @name))
  ]) @reference.call

(type_identifier) @name @reference.type

(selector_expression operand: (identifier) field: (field_identifier) @name) @reference.field

(expression_list (identifier) @name) @reference.variable
