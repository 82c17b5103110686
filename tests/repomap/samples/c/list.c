#include <stdlib.h>
#include "list.h"

static node_t *node_new(int value) {
    node_t *n = malloc(sizeof(node_t));
    n->value = value;
    n->next = NULL;
    return n;
}

void list_push(struct list *l, int value) {
    node_t *n = node_new(value);
    n->next = l->head;
    l->head = n;
    l->size++;
}

int list_sum(const struct list *l) {
    int sum = 0;
    for (node_t *n = l->head; n; n = n->next) {
        sum += n->value;
    }
    return sum;
}

node_t *list_find(struct list *l, int value) {
    for (node_t *n = l->head; n; n = n->next) {
        if (n->value == value) {
            return n;
        }
    }
    return NULL;
}
