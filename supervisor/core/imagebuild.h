/* Images (sbx-images(7)): root filesystems built from Debian packages.
 *
 * A definition is NAME.conf in images_dir (INI, read with inih): [image]
 * description, suite, components, variant, packages, npm (or unavailable =
 * why it cannot be built); [environment] KEY = value for its commands;
 * [versions] PROGRAM = a command whose first line is its version. A file
 * that is not root's, or that others may write, is refused, as the worker
 * binary is. Its canonical form (what builds it: not the description nor
 * the environment) is digested; the build is STATE/images/DIGEST, made
 * once by sbx-image-build (mmdebstrap --mode=unshare, the host's apt
 * sources), a child process watched by its pidfd: sbxd's loop never waits
 * for it. Every caller that needs the image while it builds waits for that
 * one build (an ImageWaiter); a failed build names the image and its step,
 * leaves nothing behind, and the next caller starts another.
 *
 * Definitions are read again whenever an image is looked up (a few small
 * files), so an edit takes effect at the next session. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/server.h"
#include "sbx.pb-c.h"

typedef struct Image Image;
typedef struct ImageWaiter ImageWaiter;

/* Someone waiting for a build: done(r < 0, why naming the image and step)
 * when it failed, done(0, NULL) when built. Removed from the list first. */
struct ImageWaiter {
        TAILQ_ENTRY(ImageWaiter) link;
        Image *image;                   /* NULL while not waiting */
        uint64_t ticket;                /* the order it came in */
        void (*done)(Server *s, ImageWaiter *w, int r, const char *why);
        /* The build is at another step (may be NULL). */
        void (*progress)(Server *s, ImageWaiter *w, const char *image, const char *step);
};

/* What a session of a built image needs (strings owned by the caller). */
typedef struct ImageUse {
        char digest[41];
        char *root_dir;                 /* STATE/images/DIGEST/root */
        char **env;                     /* "KEY=VALUE", NULL-terminated */
        size_t n_env;
} ImageUse;

/* Empty set; STATE/images and its leftovers of an interrupted build are
 * cleaned (at start, before the loop runs). */
int images_init(Server *s);
void images_free(Server *s);

/* Whether name is "default" or has a definition now. */
bool image_exists(Server *s, const char *name);

/* Ready it for a session: 1 with *ret filled if built, 0 if w waits for
 * its build (started if none runs), -errno with ret_error set if it cannot
 * be (no definition, refused, unavailable). */
int image_acquire(Server *s, const char *name, ImageWaiter *w, ImageUse *ret, char *ret_error, size_t error_size);
/* w stops waiting (its session went first). */
void image_waiter_cancel(ImageWaiter *w);
/* A session mounts the build of digest from now on / no longer: rm and gc
 * leave a build in use alone. */
void image_use_hold(Server *s, const char *digest);
void image_use_release(Server *s, const char *digest);
void image_use_done(ImageUse *u);

/* Start building name now (ahead of time): 1 if already built, 0 started or
 * joined (w, if not NULL, is told when it ends), -errno with ret_error. */
int image_build(Server *s, const char *name, ImageWaiter *w, char *ret_error, size_t error_size);

/* The images as listings show them, "default" first; uid limits the
 * sandboxes named to the caller's (0: all). *ret and its items are freed
 * by image_list_free. */
int image_list(Server *s, uid_t uid, Sbx__ImageListReply **ret);
void image_list_free(void *p);

/* Remove name's current build; -EBUSY naming the sandboxes that use it. */
int image_remove(Server *s, const char *name, char *ret_error, size_t error_size);
/* Remove the builds that no definition names and no session mounts;
 * returns how many went (and their bytes). */
unsigned images_collect(Server *s, uint64_t *ret_bytes);
