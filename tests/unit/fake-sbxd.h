/* A supervisor for unit tests of core/ and the request layer: a Server with
 * its state in a temporary directory (a real store, transcripts, epoll set),
 * sandboxes made in memory, clients on socketpairs, and a fake spawner: the
 * test binary is linked with -Wl,--wrap=session_spawn_begin,
 * --wrap=session_spawn_continue, so a session's "child" is a forked process
 * that only waits to be killed, its worker socket's other end is the test's,
 * and its set-up channel advances one step per byte the test writes
 * (FAKE_PID, FAKE_MAPPED, FAKE_DONE, FAKE_FAIL). Nothing needs root. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "control.h"
#include "core/client.h"
#include "core/sandbox.h"
#include "core/server.h"
#include "core/session.h"

#define FAKE_PID 'p'            /* the spawner made the child: its pid and pidfd */
#define FAKE_MAPPED 'm'         /* its user namespace maps are written */
#define FAKE_DONE 'd'           /* the set-up is done: EOF of the channel */
#define FAKE_FAIL 'f'           /* the set-up failed */

typedef struct FakeSession {
        char id[40];
        int worker;             /* the worker's end of the session socket */
        int sync;               /* write FAKE_* bytes here */
        pid_t child;
} FakeSession;

void fake_server_init(Server *s);
void fake_server_done(Server *s);
/* A sandbox, recorded, with an empty layer 0, owned by owner. */
Sandbox *fake_sandbox(Server *s, const char *name, uid_t owner);
/* A client with uid whose requests go through the request table; *ret_peer is its other end. */
Client *fake_client(Server *s, uid_t uid, int *ret_peer);
/* Dispatch what is ready and run the loop's tick, as sbxd.c's loop does, until
 * nothing is ready for wait_ms. */
void fake_pump(Server *s, int wait_ms);
/* Pump the loop until fd has something to read (at most about 2 s): for answers that
 * wait on work done off the loop. */
void fake_pump_until_readable(Server *s, int fd);
/* The fake spawner's record of session id (NULL if it made none). */
FakeSession *fake_session(const char *id);
/* Step a session's set-up: write the bytes, then pump. */
void fake_setup(Server *s, const char *id, const char *steps);
/* Send one message from the worker of session id. */
void fake_worker_send(const char *id, Sbx__MsgType type, void *body);
/* The next message to the worker of session id (waits up to 2 s); free with sbx__msg__free_unpacked. */
Sbx__Msg *fake_worker_recv(const char *id);
/* The next reply on a client's peer end (waits up to 2 s); free with sbx__msg__free_unpacked. */
Sbx__Msg *fake_reply(int peer, uint32_t *ret_seq);
/* Whether nothing waits on fd now. */
bool fake_nothing_to_read(int fd);
/* The session that has id, live (NULL if none). */
WorkspaceSession *fake_find(Server *s, const char *id);
/* Make ws ready: set up and READY from its worker. */
void fake_ready(Server *s, WorkspaceSession *ws);
