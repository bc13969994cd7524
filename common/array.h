/* Growable arrays: one way to make room, and one listing of records with a
 * string each (what a store callback hands over, kept past the callback).
 * Non-logging. */
#pragma once

#include <stddef.h>

/* Make room for need elements of size bytes in *array, which holds *cap:
 * the capacity doubles (from 16) until it fits. *array and *cap change only
 * on success. -ENOMEM, or -E2BIG if the bytes would overflow. */
int array_reserve(void **array, size_t *cap, size_t need, size_t size);
#define ARRAY_RESERVE(array, cap, need) array_reserve((void **) &(array), &(cap), (need), sizeof(*(array)))

/* The last bytes of a stream: buf (room for max, holding *len) keeps the
 * last max bytes of what it held followed by data. */
void tail_keep(char *buf, size_t *len, size_t max, const void *data, size_t n);

/* Records of item_size bytes, each with a copy of a string. */
typedef struct Listing {
        size_t item_size;
        size_t n, items_cap, strings_cap;
        void *items;
        char **strings;
} Listing;

/* Append a copy of item and of string. */
int listing_add(Listing *l, const void *item, const char *string);
static inline void *listing_item(const Listing *l, size_t i) {
        return (char *) l->items + i * l->item_size;
}
void listing_done(Listing *l);
/* A listing on the heap, and its end (listing_done, then free; NULL-safe). */
Listing *listing_new(size_t item_size);
void listing_free(void *l);
