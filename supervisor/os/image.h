/* The embedded default image: what "/" looks like in a session. The host's
 * system directories (/usr and the merged-usr links) are mounted read-only
 * at session start; this directory provides the rest: an /etc with only what
 * programs need (generated passwd, group, hosts; copies of the loader cache,
 * alternatives, certificates), and empty /tmp, /root, /home, /run, /workspace
 * mount points. No host secret (shadow, ssh keys, /root, /home, sbx state) is
 * in it. Non-logging. */
#pragma once

#include <sys/types.h>

#include "sbx.pb-c.h"

#define SBX_IMAGE_DEFAULT_NAME "default"        /* the built-in image, as sbxctl image list names it */

/* The default image as image listings show it (static strings). */
void image_default_info(Sbx__ImageInfo *ret);

typedef enum ImageBuild {
        IMAGE_UP_TO_DATE,               /* its inputs did not change: nothing written */
        IMAGE_BUILT,                    /* beside the old one, which went once the new one was whole */
        IMAGE_BUILT_IN_PLACE,           /* no room beside it: the old one went first */
} ImageBuild;

/* Build the image as "image-default" below state_dirfd unless the stamp of
 * its inputs (image-default.stamp: the host's /etc files it copies, the
 * system links, the generated files) says the one there is theirs; a new one
 * is built beside the old one when the state filesystem has room for both
 * (twice the old one's size, at least SBX_IMAGE_ROOM_MIN), else in its place.
 * Everything in it is host root's: it is shared by every sandbox, each with
 * its own host ids. */
int image_build_default(int state_dirfd, ImageBuild *ret);
