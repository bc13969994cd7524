/* The allowlists of the script set's arguments (shared/seeds/001): the
 * image names and egress modes sandbox_script takes, checked by sandbox-mcp
 * and again by sbxd (core/job.h) with the seed's wording. Non-logging. */
#pragma once

#include <stddef.h>

extern const char *const script_images[8];
extern const char *const script_egress_modes[3];
#define SCRIPT_IMAGE_DEFAULT "anaconda"
#define SCRIPT_EGRESS_DEFAULT "package-managers"

/* 0 if value is one of list; else -EINVAL with err =
 * WHAT "VALUE" is not in the allowlist (A, B, ...). */
int allowlist_check(const char *what, const char *value, const char *const *list, size_t n, char *err, size_t size);
/* The two of the seed: "image" and "egress mode". */
int script_check_image(const char *image, char *err, size_t size);
int script_check_egress(const char *egress, char *err, size_t size);
