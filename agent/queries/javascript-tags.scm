; JavaScript tags: derived from tree-sitter-javascript's queries/tags.scm (doc-comment captures
; dropped: the map shows signatures, not docs). TypeScript and TSX use these patterns too,
; together with typescript-tags.scm.

(method_definition
  name: (property_identifier) @name
  (#not-eq? @name "constructor")) @definition.method

(class name: (_) @name) @definition.class

(class_declaration name: (_) @name) @definition.class

(function_expression name: (identifier) @name) @definition.function

(function_declaration name: (identifier) @name) @definition.function

(generator_function name: (identifier) @name) @definition.function

(generator_function_declaration name: (identifier) @name) @definition.function

(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression)]) @definition.function)

(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression)]) @definition.function)

(program
  (lexical_declaration
    (variable_declarator
      name: (identifier) @name
      value: [(number) (string) (template_string) (object) (array) (new_expression) (call_expression)])
    @definition.constant))

(program
  (export_statement
    (lexical_declaration
      (variable_declarator
        name: (identifier) @name
        value: [(number) (string) (template_string) (object) (array) (new_expression) (call_expression)])
      @definition.constant)))

(assignment_expression
  left: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]
  right: [(arrow_function) (function_expression)]) @definition.function

(pair
  key: (property_identifier) @name
  value: [(arrow_function) (function_expression)]) @definition.function

(call_expression
  function: (identifier) @name
  (#not-eq? @name "require")) @reference.call

(call_expression
  function: (member_expression property: (property_identifier) @name)) @reference.call

(new_expression constructor: (identifier) @name) @reference.class

(new_expression constructor: (member_expression property: (property_identifier) @name)) @reference.class

(import_specifier name: (identifier) @name) @reference.import
