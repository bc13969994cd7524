#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/box-config.h"
#include "egress-policy.h"
#include "sbx-limits.h"

/* box_idle_timeout_min: minutes, a decimal >= 0 (0: never frozen; 0.05 is 3 s). */
static int parse_minutes(const char *value, uint64_t *ret, char *err) {
        char *end;
        double m;

        errno = 0;
        m = strtod(value, &end);
        if (errno || end == value || *end || !(m >= 0) || m * 60e3 > (double) SBX_BOX_IDLE_TIMEOUT_MAX_MS) {
                snprintf(err, CONFIG_ERROR_MAX,
                         "box_idle_timeout_min: '%.40s' is not a number of minutes from 0 (never) to %u", value,
                         SBX_BOX_IDLE_TIMEOUT_MAX_MS / 60000u);
                return -EINVAL;
        }
        *ret = (uint64_t) (m * 60e3);
        return 0;
}

int box_config_set(Config *cfg, const char *key, const char *value, char *err) {
        size_t n = strlen(value);

        if (strcmp(key, "box_idle_timeout_min") == 0)
                return parse_minutes(value, &cfg->box_idle_timeout_ms, err);
        /* The network of every box (docs/egress.md); sandbox_wire mode external needs one but none. */
        if (strcmp(key, "box_egress") == 0) {
                if (egress_policy_from_string(value, &cfg->box_egress) < 0) {
                        char why[EGRESS_ERROR_MAX];

                        egress_policy_error(value, why);
                        snprintf(err, CONFIG_ERROR_MAX, "box_egress: %s", why);
                        return -EINVAL;
                }
                return 0;
        }
        if (strcmp(key, "box_image") != 0)
                return 1;
        if (n == 0 || n > SBX_NAME_MAX || strspn(value, "abcdefghijklmnopqrstuvwxyz0123456789-_") != n) {
                snprintf(err, CONFIG_ERROR_MAX, "box_image: '%.40s' is not an image name (sbx-images(7))", value);
                return -EINVAL;
        }
        strlcpy(cfg->box_image, value, sizeof(cfg->box_image));
        return 0;
}

int box_template_add(Config *cfg) {
        Template *t = reallocarray(cfg->templates, cfg->n_templates + 1, sizeof(Template));

        if (!t)
                return -ENOMEM;
        cfg->templates = t;
        t[cfg->n_templates++] = (Template) {
                .name = BOX_TEMPLATE,
                .cpu_weight = 100,
                .warm = cfg->box_spares,
                .no_expiry = true,
                .box = true,
                .egress = cfg->box_egress,
        };
        strlcpy(t[cfg->n_templates - 1].image, cfg->box_image, sizeof(t->image));
        return 0;
}
