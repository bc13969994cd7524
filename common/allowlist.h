/* The allowlist of the script set's images (shared/seeds/001): the image
 * names sandbox_script takes, checked by sandbox-mcp and again by sbxd
 * (core/job.h) with the seed's wording; its egress modes are the egress
 * policies (common/egress-policy.h), one list for every set. Non-logging. */
#pragma once

#include <stddef.h>

extern const char *const script_images[8];
#define SCRIPT_IMAGE_DEFAULT "anaconda"
#define SCRIPT_EGRESS_DEFAULT "package-managers"

/* 0 if value is one of list; else -EINVAL with err =
 * WHAT "VALUE" is not in the allowlist (A, B, ...). */
int allowlist_check(const char *what, const char *value, const char *const *list, size_t n, char *err, size_t size);
/* sandbox_script's image (the seed's list) and egress mode (a policy's
 * name): 0, or -EINVAL with err in the seed's wording, the image's first. */
int script_check_args(const char *image, const char *egress, char *err, size_t size);
