/* Every user-controllable resource has a named limit here; sbxd.conf(5)
 * and sbxd(8) document them and tests/ hit each one. */
#pragma once

/* Wire */
#define SBX_FRAME_MAX (128u * 1024u)            /* bytes of one protobuf frame body */
/* Worker output bytes per frame: a frame then stays under 64 KiB, what a unix
 * datagram carries in page fragments; larger ones need a high-order linear
 * buffer (1 GiB transcript: 120 KiB frames 245-335 MB/s, 32 KiB 464-612,
 * 60 KiB 582-715, interleaved). */
#define SBX_OUTPUT_CHUNK_MAX (60u * 1024u)
#define SBX_STDIN_MAX (64u * 1024u)             /* bytes per write_command_stdin */
#define SBX_CMD_MAX (64u * 1024u)               /* bytes of an exec_command cmd */
#define SBX_NAME_MAX 64u                        /* sandbox and session names */

/* Broker */
#define SBX_MCP_LINE_MAX (40u * 1024u * 1024u)  /* one JSON-RPC input line: a 16 MiB file_write, escaped */
#define SBX_MCP_MAX_PENDING 256u                /* concurrent tools/call per broker */
#define SBX_MCP_PROBE_MS 2000u                  /* start-up: wait for sbxd's answer (initialize instructions) */
#define SBX_SANDBOXES_NAMED 10u                 /* sandboxes named in an error or the instructions */
#define SBX_EDIT_DIFF_MAX_BYTES (8u * 1024u)    /* file_edit's diff in its rendered result */
#define SBX_TEXT_PATHS_SHOWN 10u                /* conflicting paths named in a rendered result */

/* Supervisor */
#define SBX_MAX_CLIENTS 256u                    /* connections on sbxd.sock */
#define SBX_LISTEN_BACKLOG 64u                  /* connections on sbxd.sock not accepted yet */
#define SBX_MAX_CLIENTS_PER_UID 64u             /* of one uid other than root */
#define SBX_CLIENTS_RESERVED_ROOT 16u           /* of SBX_MAX_CLIENTS, only root may take */
#define SBX_CLIENTS_RESERVED_GROUP 32u          /* further ones only root and socket_group may take */
#define SBX_CLIENT_IDLE_DEFAULT_S 60u           /* sbxd.conf client_idle_seconds: a connection with no
                                                   request (and nothing pending) this long is closed */
#define SBX_MAX_PENDING_PER_CLIENT 256u         /* unanswered requests per connection */
#define SBX_PEER_GROUPS_MAX 256u                /* supplementary groups of a client looked at for
                                                   socket_group (a member of more counts as none) */
#define SBX_CLIENT_OUTQ_MAX 64u                 /* replies queued for a client that does not read them */
#define SBX_EVENTS_PER_WAKEUP 32u              /* ready sources sbxd's loop takes from one epoll_wait */
#define SBX_WORKER_MESSAGES_PER_WAKEUP 64u      /* frames read from one worker per wakeup: one chatty
                                                   worker cannot starve the others */
#define SBX_MAX_SANDBOXES 1024u
#define SBX_IMPORT_UNREADABLE_SHOWN 8u          /* unreadable source paths named by sandbox create */
#define SBX_IMPORT_GROUPS_MAX 1024u             /* supplementary groups of an owner the import reads with */
#define SBX_MAX_LIVE_SESSIONS 512u              /* workspace sessions with a worker */
#define SBX_MAX_COMMANDS_PER_SESSION 64u        /* running commands in one session */
#define SBX_HEAP_KEEP_BYTES (32u << 20)         /* freed heap memory sbxd keeps for reuse */
#define SBX_BROKER_HEAP_KEEP_BYTES (4u << 20)   /* the same for each sandbox-mcp (one per agent) */
#define SBX_JSON_DEPTH_MAX 64u                  /* nesting of a JSON value sandbox-mcp writes */
/* Bytes of the lowerdir string of a snapshot overlay ("N:N-1:…", layer
 * names) on kernels whose overlayfs lacks "lowerdir+" (before 6.8):
 * fsconfig() copies at most 256 bytes with the NUL. A longer stack is
 * compacted first. */
#define SBX_OVERLAY_LOWERS_STRING_MAX 255u
#define SBX_READ_FILE_MAX (1u << 20)            /* a kernel interface file read whole (read_file_at):
                                                   cgroup.procs of a big cgroup, 7 bytes per pid */

/* Commands */
#define SBX_YIELD_DEFAULT_MS 10000u             /* exec_command yield_time_ms default */
#define SBX_STDIN_YIELD_DEFAULT_MS 1000u        /* write_command_stdin yield default */
#define SBX_YIELD_MAX_MS 30000u                 /* clamp: stays under clients' 60 s timeout */
#define SBX_TIMEOUT_DEFAULT_MS (10u * 60u * 1000u)
#define SBX_TIMEOUT_MAX_MS (24ull * 3600u * 1000u)
#define SBX_KILL_GRACE_MS 2000u                 /* a killed process group that lingers longer costs its session */
#define SBX_CANCEL_WAIT_MS 2000u                /* cancel_command answers once the command ended, or after this */
#define SBX_COMMANDS_LISTED 500u                /* commands in one list_command_sessions reply (the newest) */

/* The text of one tool result: a command window (a yield or
 * read_command_lines) and a file_read window end, at a line boundary, before
 * their text escaped as a JSON string exceeds this. Measured with Claude's
 * tokenizer on 2,000-line files (docs/benchmarks.md), a full window as
 * structuredContent JSON is 13.5k tokens of code, 12.3k of prose and 18.7k of
 * JSON (64 KiB would give 23.0k of JSON), under Claude Code's limit of 25,000
 * tokens for one MCP result (MAX_MCP_OUTPUT_TOKENS). */
#define SBX_RESULT_TEXT_BUDGET (52u * 1024u)

/* Transcript windows returned in one reply */
#define SBX_WINDOW_MAX_LINES 200u               /* exec/stdin yield window */
#define SBX_READ_DEFAULT_LINES 200u             /* read_command_lines default limit */
#define SBX_READ_MAX_LINES 1000u                /* read_command_lines maximum limit */
#define SBX_LINE_MAX 4096u                      /* longer rendered lines wrap */
#define SBX_TRANSCRIPT_CAP_DEFAULT (256ull << 20) /* rendered bytes kept on disk */

/* Sandbox defaults */
#define SBX_MEMORY_DEFAULT (1ull << 30)
#define SBX_PIDS_DEFAULT 512u
#define SBX_SESSION_DISK_DEFAULT (1ull << 30)   /* tmpfs size of a session's writes */

/* Files (issue 3) */
#define SBX_FILE_MAX (16ull << 20)              /* file_write content, file_edit edits, a file edited */
#define SBX_FILE_READ_DEFAULT_LINES 2000u
#define SBX_FILE_READ_MAX_LINES 2000u
#define SBX_DIFF_MAX_BYTES (96u * 1024u)        /* unified diff in one reply */
#define SBX_PATH_MAX 4096u
#define SBX_PATH_SHOWN_MAX 160u                 /* bytes of a path quoted in a message (start ... end) */
#define SBX_TREE_DEPTH_MAX 256u                 /* directory levels of a layer: deeper trees are refused */
#define SBX_SOURCE_DIR_MAX 4095u                /* bytes of a sandbox's source directory (PATH_MAX - 1) */
#define SBX_PUBLISH_MAX_PATHS 1000000u          /* changed paths in one publication */
#define SBX_CONFLICTS_REPORTED 100u             /* conflicting paths named in one answer */
#define SBX_STACK_MAX_LAYERS 48u                /* above this many lowers, publication compacts */
#define SBX_LAYERS_LISTED 1000u                 /* layers in one list_layers reply; the client asks for the rest */
#define SBX_MAX_SESSIONS_PER_SANDBOX 64u        /* live managed + automatic sessions */
#define SBX_SPARES_DEFAULT 2u                   /* sbxd.conf session_spares: per sandbox */
#define SBX_SPARES_MAX 8u
#define SBX_SPARE_IDLE_DEFAULT_S 120u           /* sbxd.conf session_spare_idle_seconds */
#define SBX_FILE_INDEX_CACHE_ENTRIES 256u       /* snapshot files whose line index file_read keeps */
#define SBX_FILE_INDEX_CACHE_BYTES (4u << 20)   /* bytes of those indexes' line marks together */

/* Commands' own limits, set by the worker in the command child (issue 4) */
#define SBX_COMMAND_NOFILE 4096u                /* RLIMIT_NOFILE, soft and hard */
#define SBX_COMMAND_OOM_SCORE_ADJ 500           /* the OOM killer takes commands before the worker */

/* Host ids of sandboxes (sbxd.conf uid_base, uid_count; issue 13): each
 * sandbox owns the uid and gid range [b, b + uid_count) for one b =
 * uid_base + k * uid_count, recorded in sbx.db while the sandbox or any of
 * its files exists. Root inside is host uid b. */
#define SBX_UID_BASE_DEFAULT 100000u
#define SBX_UID_COUNT_DEFAULT 65536u            /* inside: 0 to 65535, nobody (65534) included */
#define SBX_UID_POOL_END 0x80000000u            /* no range reaches 2^31: tools that keep uids in an int */

/* Images (issue 17, sbx-images(7)): definitions NAME.conf in images_dir,
 * builds in STATE/images/DIGEST. A build's user namespace maps the host ids
 * [SBX_IMAGE_BUILD_UID_BASE, +65536), the top of the pool, which no sandbox
 * gets. */
#define SBX_IMAGES_MAX 64u                      /* definitions read from images_dir */
#define SBX_IMAGE_DEF_MAX (64u << 10)           /* bytes of one definition file */
#define SBX_IMAGE_ENV_MAX 32u                   /* [environment] variables of one image */
#define SBX_IMAGE_VERSIONS_MAX 16u              /* [versions] entries of one image */
#define SBX_IMAGE_VALUE_MAX 4096u               /* bytes of one value (the package list included) */
#define SBX_IMAGE_DISK_MAX_DEFAULT (20ull << 30) /* sbxd.conf image_disk_max: all builds together */
#define SBX_IMAGE_BUILD_UID_BASE (SBX_UID_POOL_END - 65536u)
#define SBX_IMAGE_PROGRESS_MAX 64u              /* bytes of a step name the helper reports */
