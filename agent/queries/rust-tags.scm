; Rust tags: derived from tree-sitter-rust's queries/tags.scm. An impl block is a scope: a method
; is shown under its `impl` line.

(struct_item name: (type_identifier) @name) @definition.class

(enum_item name: (type_identifier) @name) @definition.class

(union_item name: (type_identifier) @name) @definition.class

(type_item name: (type_identifier) @name) @definition.class

(function_item name: (identifier) @name) @definition.function

(function_signature_item name: (identifier) @name) @definition.function

(trait_item name: (type_identifier) @name) @definition.interface

(mod_item name: (identifier) @name) @definition.module

(macro_definition name: (identifier) @name) @definition.macro

(const_item name: (identifier) @name) @definition.constant

(static_item name: (identifier) @name) @definition.constant

(impl_item) @scope

(call_expression function: (identifier) @name) @reference.call

(call_expression function: (field_expression field: (field_identifier) @name)) @reference.call

(call_expression function: (scoped_identifier name: (identifier) @name)) @reference.call

(call_expression function: (scoped_identifier path: (identifier) @name)) @reference.type

(macro_invocation macro: (identifier) @name) @reference.call

(use_list (identifier) @name) @reference.import

(scoped_identifier name: (identifier) @name) @reference.path

(type_identifier) @name @reference.type
