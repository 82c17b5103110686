; Python tags: derived from tree-sitter-python's queries/tags.scm, with more references
; (base classes, decorators, type annotations, imported names) so the ranking sees them.

(module (expression_statement (assignment left: (identifier) @name) @definition.constant))

(class_definition name: (identifier) @name) @definition.class

(function_definition name: (identifier) @name) @definition.function

(call function: (identifier) @name) @reference.call

(call function: (attribute attribute: (identifier) @name)) @reference.call

(decorator (identifier) @name) @reference.call

(decorator (attribute attribute: (identifier) @name)) @reference.call

(class_definition superclasses: (argument_list (identifier) @name) @reference.class)

(class_definition superclasses: (argument_list (attribute attribute: (identifier) @name)) @reference.class)

(type (identifier) @name) @reference.type

(import_from_statement name: (dotted_name (identifier) @name)) @reference.import

(import_from_statement name: (aliased_import name: (dotted_name (identifier) @name))) @reference.import
