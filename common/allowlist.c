#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "allowlist.h"
#include "macro.h"

/* In the order the seed's errors name them. */
const char *const script_images[8] = { "node", "python", "anaconda", "go", "browser", "media", "twine", "webgamedev" };
const char *const script_egress_modes[3] = { "none", "package-managers", "open" };

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

int script_check_image(const char *image, char *err, size_t size) {
        return allowlist_check("image", image, script_images, ELEMENTSOF(script_images), err, size);
}

int script_check_egress(const char *egress, char *err, size_t size) {
        return allowlist_check("egress mode", egress, script_egress_modes, ELEMENTSOF(script_egress_modes), err, size);
}
