/* Budgets of all transcripts: the bytes they store (transcript_stored_bytes)
 * per sandbox (sandbox_transcripts_max_bytes), per owner of sandboxes
 * (owner_transcripts_max_bytes) and of all (transcripts_max_bytes), and
 * their files (transcripts_max_inodes). sbxd keeps the counts in
 * Sandbox.transcript_* and Server.transcript_*: a running command's as its
 * transcript grows, an ended one's as its record says. Before a budget would
 * be passed, the transcripts of ended commands go, oldest first (by start),
 * within the sandbox or owner that is over, or of all: the record names the
 * budget, which listings show and reading such a transcript says. A running
 * command that still does not fit is cut (transcript_set_limit): its
 * transcript's last line says so. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Server Server;
typedef struct Sandbox Sandbox;
typedef struct Command Command;
typedef struct Transcript Transcript;

/* At start, after the sandboxes are loaded: count what each stores (the
 * transcripts of commands an earlier sbxd left running from their files),
 * and fix the global budget (transcripts_max_bytes = 0: a share of the state
 * filesystem). ret_unrecorded: transcripts counted whose size the store could
 * not take (a full state filesystem); they are recorded at a later start. */
int transcripts_load(Server *s, unsigned *ret_unrecorded);
/* Room for the files of a new transcript in sb, evicting if need be; else
 * -ENOSPC and ret_error says which budget. */
int transcripts_admit(Server *s, const Sandbox *sb, unsigned files, char *ret_error, size_t error_size);
/* c's transcript was just created: count its files. */
void transcripts_started(Server *s, Command *c);
/* Before n raw bytes go to c's transcript: room, evicting if need be, and
 * the limit that keeps it within every budget. */
void transcripts_fit(Server *s, Command *c, size_t n);
/* After: count what c's transcript grew by. */
void transcripts_charge(Server *s, Command *c);
/* c is no longer counted live: ended and recorded, or its record gone. */
void transcripts_uncount(Server *s, Sandbox *sb, uint64_t bytes, uint64_t files);
/* Evict the transcript of the ended command id (an expired artifact's,
 * core/artifacts.h), its record naming reason; 0 if it is gone already or
 * still running, -ENOENT if there is no such record. */
int transcripts_evict(Server *s, const char *id, const char *reason);
/* sb's query_kept, if it is id's (it is removed or rewritten): closed. */
void transcripts_forget_kept(Sandbox *sb, const char *id);
/* The transcript of the ended command id was compressed on disk
 * (transcript_compress, a persisted artifact's): it stores bytes in files
 * now. Its record, the command in memory (which takes *t, the transcript
 * reopened) and the budgets count that. -ESTALE if it was evicted or its
 * record removed meanwhile: the files the compression made go too. */
int transcripts_compressed(Server *s, const char *id, uint64_t bytes, unsigned files, Transcript **t);
/* The sandbox of that id (as command records name it), or NULL; here, below
 * sandbox.c, because the budgets look sandboxes up by their records. */
Sandbox *sandbox_find_id(Server *s, const char *id);
/* What the transcripts of the sandboxes of owner store. */
uint64_t transcripts_owner_bytes(const Server *s, uid_t owner);
