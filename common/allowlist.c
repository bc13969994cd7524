#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "allowlist.h"
#include "egress-policy.h"
#include "macro.h"

/* In the order the seed's errors name them. */
const char *const script_images[8] = { "node", "python", "anaconda", "go", "browser", "media", "twine", "webgamedev" };

int allowlist_check(const char *what, const char *value, const char *const *list, size_t n, char *err, size_t size) {
        char names[160] = "";

        for (size_t i = 0; i < n; i++) {
                if (strcmp(value, list[i]) == 0)
                        return 0;
                strlcat(names, i ? ", " : "", sizeof(names));
                strlcat(names, list[i], sizeof(names));
        }
        snprintf(err, size, "%s \"%.80s\" is not in the allowlist (%s)", what, value, names);
        return -EINVAL;
}

int script_check_args(const char *image, const char *egress, char *err, size_t size) {
        char why[EGRESS_ERROR_MAX];
        int r = allowlist_check("image", image, script_images, ELEMENTSOF(script_images), err, size);

        if (r < 0 || egress_policy_from_string(egress, &(EgressPolicy) { 0 }) >= 0)
                return r;
        egress_policy_error(egress, why);
        snprintf(err, size, "%s", why);
        return -EINVAL;
}
