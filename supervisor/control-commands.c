/* Requests about commands: exec_command, write_command_stdin,
 * read_command_lines, list_command_sessions and cancel_command. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "array.h"
#include "control.h"
#include "core/owner.h"
#include "core/layerquota.h"
#include "core/session.h"
#include "core/spare.h"
#include "core/transcripts.h"
#include "fd-util.h"
#include "sbx-limits.h"

int command_session_for(Request *rq, const char *workspace_session, WorkspaceSession **ret) {
        Server *s = rq->server;
        Sandbox *sb = rq->sandbox;
        WorkspaceSession *ws;
        char errmsg[512] = "";
        int r;

        if (!workspace_session[0]) {
                *ret = spare_take(s, sb);
                if (*ret)
                        return 0;
                spare_make_room(s, sb);
                r = session_new(s, sb, true, true, ret, errmsg, sizeof(errmsg));
                return r < 0 ? request_error(rq, r, "%s", errmsg[0] ? errmsg : strerror(-r)) : 0;
        }
        ws = session_find(s, sb, workspace_session);
        if (!ws)
                return request_error(rq, -ENOENT, "no live workspace session '%.80s' in sandbox '%s'",
                                     workspace_session, sb->name);
        if (ws->state == SESSION_STOPPED)
                return request_error(rq, -ESHUTDOWN,
                                     "workspace session %s is stopped%s; it runs no more commands: finalize it "
                                     "(publish with overwrite, or discard)",
                                     ws->id, ws->conflicted ? " after a publication conflict"
                                             : ws->discard_usec ? " after a failed publication (it is discarded "
                                                                  "once failed_session_grace_seconds pass)" : "");
        *ret = ws;
        return 0;
}

/* The caller waits for the command's output (told of its image's build if
 * progress); out of memory, it is told so. */
static int wait_for(Request *rq, Command *cmd, unsigned long long call_start, uint64_t yield_ms, bool progress) {
        int r = (progress ? command_add_progress_waiter : command_add_waiter)(rq->server, cmd, rq->client, rq->seq,
                                                                              call_start, yield_ms);
        return r < 0 ? request_error(rq, r, "out of memory") : REPLY_DEFERRED;
}

int handle_exec(Request *rq) {
        const Sbx__Exec *req = rq->msg->exec;
        unsigned long long call_start = now_usec();
        uint64_t timeout_ms = req->has_timeout ? req->timeout_ms : SBX_TIMEOUT_DEFAULT_MS;
        uint64_t yield_ms = req->has_yield ? MIN(req->yield_ms, SBX_YIELD_MAX_MS) : SBX_YIELD_DEFAULT_MS;
        WorkspaceSession *ws;
        Command *cmd;
        char why[400];
        int r;

        r = owner_quota_check(rq->server, "owner_commands_max", rq->sandbox->owner_uid, 1, why, sizeof(why));
        if (r >= 0)
                r = transcripts_admit(rq->server, rq->sandbox, transcript_files_new(req->separate_streams), why,
                                      sizeof(why));
        if (r < 0)
                return request_error(rq, r, "cannot start the command: %s", why);
        r = command_session_for(rq, req->workspace_session, &ws);
        if (r < 0)
                return r;
        r = command_start(rq->server, ws, req->cmd, timeout_ms, req->separate_streams, &cmd);
        if (r < 0) {
                char full[160];

                if (ws->automatic && TAILQ_EMPTY(&ws->commands))
                        session_destroy(rq->server, ws);
                /* Its record and transcript live on the state filesystem. */
                state_full_message(&rq->server->layer_limits, full, sizeof(full));
                return request_error(rq, r, "cannot start the command: %s",
                                     r == -EAGAIN   ? "too many running commands in this session"
                                     : r == -ENOSPC ? full
                                                    : strerror(-r));
        }
        return wait_for(rq, cmd, call_start, yield_ms, req->progress);
}

/* A live command of the request's sandbox; else the error that says why not. */
static int live_command(Request *rq, const char *id, Command **ret) {
        Command *cmd = command_find_live(rq->server, id);
        StoreCommand rec;

        if (cmd && strcmp(cmd->rec.sandbox, rq->sandbox->id) == 0) {
                *ret = cmd;
                return 0;
        }
        if (store_command_get(rq->server->store, id, &rec) >= 0 && strcmp(rec.sandbox, rq->sandbox->id) == 0)
                return request_error(rq, -EPIPE, "command session '%.80s' has ended (%s); its stdin is closed", id,
                                     rec.status);
        return request_error(rq, -ENOENT, "no command session '%.80s' in sandbox '%s'", id, rq->sandbox->name);
}

int handle_stdin(Request *rq) {
        const Sbx__Stdin *req = rq->msg->stdin;
        unsigned long long call_start = now_usec();
        uint64_t yield_ms = req->has_yield ? MIN(req->yield_ms, SBX_YIELD_MAX_MS) : SBX_STDIN_YIELD_DEFAULT_MS;
        Command *cmd = NULL;
        int r;

        r = live_command(rq, req->command_session, &cmd);
        if (r < 0)
                return r;
        if (cmd->finished)
                return request_error(rq, -EPIPE, "command session '%s' has ended (%s); its stdin is closed",
                                     cmd->rec.id, cmd->rec.status);
        r = command_send_stdin(cmd, req->data.data, req->data.len, req->close);
        if (r < 0)
                return request_error(rq, r, "cannot write to the stdin of '%s': %s", cmd->rec.id,
                                     r == -EAGAIN ? "the command has not started yet" : strerror(-r));
        return wait_for(rq, cmd, call_start, yield_ms, false);
}

static void command_view_free(void *p) {
        command_view_done(p);
        free(p);
}

/* The reply: the command's output record with the lines [start, start + limit). */
static int reply_command_view(Request *rq, const char *id, TranscriptStream stream, uint64_t start, uint64_t limit) {
        CommandView *v = malloc(sizeof(*v));
        int r;

        if (!v)
                return -ENOMEM;
        r = command_view(rq->server, rq->sandbox, id, stream, start, limit, v);
        if (r < 0) {
                char evicted[sizeof(v->rec.evicted)];

                strlcpy(evicted, v->rec.evicted, sizeof(evicted));
                free(v);
                if (r == -ENODATA)
                        return request_error(rq, r, "command session '%.80s' did not keep stdout and stderr apart; "
                                             "read its merged output", id);
                if (r == -ENOENT)
                        return request_error(rq, r, "no command session '%.80s' in sandbox '%s'", id,
                                             rq->sandbox->name);
                if (r == -ESTALE)
                        return request_error(rq, r, "the transcript of command session '%.80s' was evicted to stay "
                                             "within %s (sbxd.conf); its record is kept", id, evicted);
                return request_error(rq, r, "cannot read command session '%.80s': %s", id, strerror(-r));
        }
        request_own(rq, command_view_free, v);
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_COMMAND, &v->o);
}

int handle_read_lines(Request *rq) {
        const Sbx__ReadLines *req = rq->msg->read_lines;

        if ((unsigned) req->stream > SBX__STREAM__STREAM_STDERR)
                return request_error(rq, -EINVAL, "stream must be merged, stdout or stderr");
        return reply_command_view(rq, req->command_session, (TranscriptStream) req->stream, req->start_offset,
                                  req->has_limit ? req->limit : SBX_READ_DEFAULT_LINES);
}

int handle_command_cancel(Request *rq) {
        const char *id = rq->msg->command_cancel->command_session;
        Command *cmd = command_find_live(rq->server, id);
        uint64_t total;

        if (cmd && strcmp(cmd->rec.sandbox, rq->sandbox->id) != 0)
                cmd = NULL;
        if (cmd && !cmd->finished) {
                command_cancel(rq->server, cmd);
                return wait_for(rq, cmd, now_usec(), SBX_CANCEL_WAIT_MS, false);
        }
        /* Already ended: its last window, as read_command_lines gives it. */
        total = cmd && cmd->transcript ? transcript_total_lines(cmd->transcript) : 0;
        return reply_command_view(rq, id, TRANSCRIPT_MERGED, total > SBX_WINDOW_MAX_LINES ? total - SBX_WINDOW_MAX_LINES : 0,
                                  SBX_WINDOW_MAX_LINES);
}

static int listing_add_command(const StoreCommand *rec, const char *cmd, void *userdata) {
        return listing_add(userdata, rec, cmd);
}

int handle_command_list(Request *rq) {
        const Sbx__CommandList *req = rq->msg->command_list;
        Sbx__CommandListReply *o = REQUEST_NEW(rq, Sbx__CommandListReply, SBX__COMMAND_LIST_REPLY__INIT);
        Listing *l = listing_new(sizeof(StoreCommand));
        Sbx__CommandInfo *infos;
        Sbx__CommandInfo **ptrs;
        size_t first;
        int r;

        if (l)
                request_own(rq, listing_free, l);
        if (!o || !l)
                return -ENOMEM;
        r = store_command_foreach(rq->server->store, rq->sandbox->id,
                                  req->workspace_session[0] ? req->workspace_session : NULL, listing_add_command, l);
        if (r < 0)
                return request_error(rq, r, "cannot list commands: %s", strerror(-r));
        /* Newest last; the reply holds what fits in one frame. */
        first = l->n > SBX_COMMANDS_LISTED ? l->n - SBX_COMMANDS_LISTED : 0;
        infos = request_alloc(rq, (l->n - first + 1) * sizeof(*infos));
        ptrs = request_alloc(rq, (l->n - first + 1) * sizeof(*ptrs));
        if (!infos || !ptrs)
                return -ENOMEM;
        for (size_t i = first; i < l->n; i++) {
                Sbx__CommandInfo *info = &infos[i - first];
                StoreCommand *stored = (StoreCommand *) listing_item(l, i);
                Command *live = command_find_live(rq->server, stored->id);
                const StoreCommand *rec = live ? &live->rec : stored;

                if (!live)
                        command_record_fix(rq->server, stored);
                sbx__command_info__init(info);
                COMMAND_RECORD_TO(info, rec);
                info->started_unix_usec = rec->started_unix_usec;
                info->ended_unix_usec = rec->ended_unix_usec;
                info->cmd = l->strings[i];
                info->transcript_evicted = (char *) rec->evicted;
                ptrs[i - first] = info;
        }
        o->n_commands = l->n - first;
        o->commands = ptrs;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_COMMAND_LIST, o);
}
