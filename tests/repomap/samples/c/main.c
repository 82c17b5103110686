#include <stdio.h>
#include "list.h"

int main(void) {
    struct list l = {0};
    for (int i = 0; i < LIST_MAX; i++) {
        list_push(&l, i);
    }
    printf("%d\n", list_sum(&l));
    return list_find(&l, 3) ? 0 : 1;
}
