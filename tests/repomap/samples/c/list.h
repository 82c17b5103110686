#ifndef LIST_H
#define LIST_H

#define LIST_MAX 128

typedef struct node {
    int value;
    struct node *next;
} node_t;

struct list {
    node_t *head;
    int size;
};

void list_push(struct list *l, int value);
int list_sum(const struct list *l);
node_t *list_find(struct list *l, int value);

#endif
