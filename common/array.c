#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"

int array_reserve(void **array, size_t *cap, size_t need, size_t size) {
        size_t ncap = *cap ? *cap : 16;
        void *p;

        if (need <= *cap)
                return 0;
        while (ncap < need) {
                if (ncap > SIZE_MAX / 2)
                        return -E2BIG;
                ncap *= 2;
        }
        if (ncap > SIZE_MAX / size)
                return -E2BIG;
        p = realloc(*array, ncap * size);
        if (!p)
                return -ENOMEM;
        *array = p;
        *cap = ncap;
        return 0;
}

int listing_add(Listing *l, const void *item, const char *string) {
        char *copy;
        int r;

        r = array_reserve(&l->items, &l->items_cap, l->n + 1, l->item_size);
        if (r >= 0)
                r = ARRAY_RESERVE(l->strings, l->strings_cap, l->n + 1);
        if (r < 0)
                return r;
        copy = strdup(string);
        if (!copy)
                return -ENOMEM;
        memcpy(listing_item(l, l->n), item, l->item_size);
        l->strings[l->n++] = copy;
        return 0;
}

void listing_done(Listing *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->strings[i]);
        free(l->strings);
        free(l->items);
        *l = (Listing) { .item_size = l->item_size };
}

Listing *listing_new(size_t item_size) {
        Listing *l = calloc(1, sizeof(*l));

        if (l)
                l->item_size = item_size;
        return l;
}

void listing_free(void *l) {
        if (!l)
                return;
        listing_done(l);
        free(l);
}

void tail_keep(char *buf, size_t *len, size_t max, const void *data, size_t n) {
        size_t keep;

        if (n >= max) {
                memcpy(buf, (const char *) data + n - max, max);
                *len = max;
                return;
        }
        keep = MIN(*len, max - n);
        memmove(buf, buf + *len - keep, keep);
        memcpy(buf + keep, data, n);
        *len = keep + n;
}
