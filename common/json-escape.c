#include "json-escape.h"

#include <string.h>

const char *const json_escapes[0x100] = {
        ['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n", ['\r'] = "\\r", ['\t'] = "\\t",
        [0x00] = "\\u0000", [0x01] = "\\u0001", [0x02] = "\\u0002", [0x03] = "\\u0003",
        [0x04] = "\\u0004", [0x05] = "\\u0005", [0x06] = "\\u0006", [0x07] = "\\u0007",
        [0x0b] = "\\u000B", [0x0e] = "\\u000E", [0x0f] = "\\u000F", [0x10] = "\\u0010",
        [0x11] = "\\u0011", [0x12] = "\\u0012", [0x13] = "\\u0013", [0x14] = "\\u0014",
        [0x15] = "\\u0015", [0x16] = "\\u0016", [0x17] = "\\u0017", [0x18] = "\\u0018",
        [0x19] = "\\u0019", [0x1a] = "\\u001A", [0x1b] = "\\u001B", [0x1c] = "\\u001C",
        [0x1d] = "\\u001D", [0x1e] = "\\u001E", [0x1f] = "\\u001F", ['"'] = "\\\"", ['\\'] = "\\\\",
};

size_t json_escaped_size(const char *buf, size_t len) {
        const unsigned char *p = (const unsigned char *) buf;
        size_t n = len;

        for (size_t i = 0; i < len; i++)
                if (json_escapes[p[i]])
                        n += strlen(json_escapes[p[i]]) - 1;
        return n;
}
