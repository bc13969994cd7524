/* libFuzzer target: what sbxd takes from sbx-egress (a less privileged
 * process): a frame through wire_parse, then egress_verdict_check
 * (supervisor/core/egress.c), as core/egress-proxy.c does. A verdict that
 * passes names a target sbxd may print and store. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/egress.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Sbx__Msg *m = NULL;
        uint32_t seq;

        if (wire_parse(data, size, 0, &m, &seq) < 0)
                return 0;
        if (m->type == SBX__MSG_TYPE__MSG_EGRESS_VERDICT && egress_verdict_check(m->egress_verdict) &&
            (strlen(m->egress_verdict->target) > SBX_EGRESS_HOST_MAX + 8 || !strchr(m->egress_verdict->target, ':')))
                abort();
        sbx__msg__free_unpacked(m, NULL);
        return 0;
}
