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
#define SBX_MCP_LINE_MAX (96u * 1024u * 1024u)  /* one JSON-RPC input line: a 64 MiB upload_file in base64 */
#define SBX_MCP_MAX_PENDING 256u                /* concurrent tools/call per broker */
#define SBX_MCP_PROBE_MS 2000u                  /* start-up: wait for sbxd's answer (initialize instructions) */
#define SBX_SANDBOXES_NAMED 10u                 /* sandboxes named in an error or the instructions */
#define SBX_EDIT_DIFF_MAX_BYTES (8u * 1024u)    /* file_edit's diff in its rendered result */
#define SBX_TEXT_PATHS_SHOWN 10u                /* conflicting paths named in a rendered result */

/* Logging */
#define SBX_LOG_BURST 10u                       /* identical messages of one call site logged in a row */
#define SBX_LOG_INTERVAL_MS 10000u              /* then one per interval, with the count of those left out */

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
/* Per-owner quotas (sbxd.conf owner_*_max, issue 15): the uid that owns a
 * sandbox holds at most this share of each global cap, so that one owner
 * cannot take them all (root, the administrator, is exempt). A quarter of
 * the sessions and sandboxes: four busy owners fill the host, a fifth is
 * refused by name rather than first come, first served. */
#define SBX_OWNER_SESSIONS_MAX_DEFAULT 128u     /* live workspace sessions (spares and stopped ones included),
                                                   of SBX_MAX_LIVE_SESSIONS */
#define SBX_OWNER_SANDBOXES_MAX_DEFAULT 256u    /* sandboxes (and imports under way), of SBX_MAX_SANDBOXES */
#define SBX_OWNER_COMMANDS_MAX_DEFAULT 512u     /* running commands: 4 per session of the default quota */
#define SBX_OWNER_COMMANDS_MAX (SBX_MAX_LIVE_SESSIONS * SBX_MAX_COMMANDS_PER_SESSION) /* what sessions can run */
/* An automatic session whose publication failed for another reason than a
 * conflict (tree too deep, path too long, a quota, a full disk) is kept
 * stopped this long, its changes in its tmpfs for inspection or a retry
 * (sbxctl session diff / finalize), then discarded (sbxd.conf
 * failed_session_grace_seconds; 0 discards it at once). */
#define SBX_FAILED_SESSION_GRACE_DEFAULT_S 300u
#define SBX_SESSION_START_MEMORY (16u << 20)  /* a new session's worker and first command, besides what the
                                                   sandbox's stopped sessions hold of its memory limit */
#define SBX_FAILED_SESSION_GRACE_MAX_S 86400u
/* An import (sbxctl sandbox create --source) still running after this is
 * killed and the sandbox not made (sbxd.conf import_timeout_seconds): a
 * source on a stalled network filesystem does not hold its name forever. */
#define SBX_IMPORT_TIMEOUT_DEFAULT_S 3600u
#define SBX_IMPORT_TIMEOUT_MAX_S 604800u
#define SBX_HEAP_KEEP_BYTES (32u << 20)         /* freed heap memory sbxd keeps for reuse */
#define SBX_BROKER_HEAP_KEEP_BYTES (4u << 20)   /* the same for each sandbox-mcp (one per agent) */
#define SBX_JSON_DEPTH_MAX 64u                  /* nesting of a JSON value sandbox-mcp writes */
/* sandbox-mcp writes a download_file result to stdout in parts of about
 * this size as it encodes them (its memory stays bounded, and the client reads
 * while the rest is encoded), reading the file's memfd this much at a time
 * (a multiple of 3: whole base64 groups). */
#define SBX_JSON_WRITE_PART (1u << 20)
#define SBX_JSON_SPLICE_READ (768u << 10)
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
#define SBX_IMAGE_ROOM_MIN (16u << 20)          /* the default image is rebuilt beside the old one with this free */
#define SBX_UNRECORDED_ENDS_MAX 10000u         /* command ends held in memory while the store cannot take them */
#define SBX_ENDED_COMMANDS_KEPT 256u           /* ended commands of live sessions held in memory (2 fds each); older ones are read from disk */
#define SBX_UNRECORDED_RETRY_MS 1000u           /* how often they are offered to the store again */
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
#define SBX_TRANSCRIPT_CAP_DEFAULT (256ull << 20) /* bytes one transcript stores: text, index, stream bits */

/* Transcripts on disk (issue 15). A transcript stores its text (.log), a
 * sparse line index (.lix: one entry per SBX_TRANSCRIPT_INDEX_LINES lines, so
 * paging reads at most that many lines more than it returns: 0.125 bytes of
 * index per line, where one entry per line cost 8) and, with stdout and
 * stderr apart, one bit per line (.str). What it stores is counted in whole
 * blocks per file, as du counts it on ext4. */
#define SBX_TRANSCRIPT_INDEX_LINES 64u
#define SBX_TRANSCRIPT_BLOCK 4096u
#define SBX_TRANSCRIPT_SCAN_CHUNK (64u * 1024u)  /* bytes of .log read at once to find lines */
/* Budgets of all transcripts (sbxd.conf): past one, the oldest ended
 * commands' transcripts in its scope are evicted; a running command that still
 * does not fit is cut. Defaults: 4 full transcripts per sandbox, 16 per owner,
 * and globally 64 or a quarter of the state filesystem, whichever is less
 * (transcripts_max_bytes = 0). */
#define SBX_SANDBOX_TRANSCRIPTS_DEFAULT (1ull << 30)
#define SBX_OWNER_TRANSCRIPTS_DEFAULT (4ull << 30)
#define SBX_TRANSCRIPTS_DEFAULT (16ull << 30)
#define SBX_TRANSCRIPTS_STATE_SHARE 4u           /* automatic global budget: 1/this of the state filesystem */
#define SBX_TRANSCRIPTS_INODES_DEFAULT 100000u   /* files of all transcripts (2 per command, 3 with streams apart) */

/* The artifacts set (issue 19, docs/artifacts.md): runtime_execute and
 * runtime_query_output. The runtime_* defaults of sbxd.conf are the seed's. */
#define SBX_RUNTIME_ALLOWED_DEFAULT "node typescript python shell powershell"
#define SBX_RUNTIME_LIST_MAX 512u               /* bytes of runtime_allowed, _allowed_executables, _env_allowlist */
#define SBX_RUNTIME_ENV_MAX 32u                 /* variables runtime_env_allowlist may name */
#define SBX_RUNTIME_DURATION_DEFAULT_MS 600000u /* runtime_max_duration_ms */
#define SBX_RUNTIME_JOBS_DEFAULT 2u             /* runtime_max_concurrent_jobs (per owner) */
#define SBX_RUNTIME_JOBS_MAX 64u
#define SBX_RUNTIME_STDOUT_DEFAULT (1u << 20)   /* runtime_max_stdout_bytes: what the result and digest see */
#define SBX_RUNTIME_STDERR_DEFAULT (256u << 10) /* runtime_max_stderr_bytes */
#define SBX_RUNTIME_STREAM_MAX (16u << 20)      /* the most either may be set to */
#define SBX_RUNTIME_ARTIFACT_DEFAULT (10u << 20) /* runtime_max_artifact_bytes: a persisted transcript at most */
#define SBX_RUNTIME_TTL_DEFAULT_MS (24ull * 3600 * 1000) /* runtime_artifact_ttl_hours = 24 */
#define SBX_RUNTIME_TTL_MAX_MS (366ull * 24 * 3600 * 1000)
#define SBX_ARTIFACTS_MAX_DEFAULT (1ull << 30)  /* runtime_artifacts_max_bytes: all live artifacts together */
/* A persisted artifact's transcript text is kept compressed (data/zframes.h):
 * independent zstd frames of this much text each, so a query decompresses
 * only the frames it reads (a lineRange or cursor page one to three, with the
 * last one that opening reads), at the level below (3, zstd's default). 256
 * KiB, not 1 MiB: a cursor page on a persisted artifact measured 6 ms with
 * 1 MiB frames (three of them decompressed), against 0.5 ms uncompressed. */
#define SBX_ARTIFACT_FRAME_BYTES (256u << 10)
#define SBX_ARTIFACT_ZSTD_LEVEL 3
#define SBX_ARTIFACT_FRAMES_KEPT 4u            /* decompressed frames a reader keeps (a page: up to 3, and another place) */
#define SBX_ARTIFACT_FRAMES_MAX (1u << 22)      /* frames one compressed file may index (1 TiB of text) */
#define SBX_RUNTIME_STDIN_MAX (512u << 10)      /* bytes of runtime_execute stdin (the seed's 512 KiB) */
#define SBX_RUNTIME_ARGS_MAX 256u               /* items of runtime_execute args */
#define SBX_RUNTIME_EXE_MAX 64u                 /* bytes of an executable's name */
#define SBX_RUNTIME_SUMMARY_LINES 20u           /* stdoutSummary/stderrSummary: last lines at most (maxResponseLines) */
#define SBX_RUNTIME_SUMMARY_BYTES 4096u
#define SBX_DIGEST_MAX_FAILURES 20u             /* a digest lists at most this many failures */
#define SBX_DIGEST_DETECT_BYTES (1u << 20)      /* a parser is tried if its marks are in a stream's first or last MiB */
#define SBX_DIGEST_FIELD_MAX 400u               /* bytes of a failure's name or message, of the summary */
#define SBX_DIGEST_JUNIT_MAX (16u << 20)        /* bytes of a JUnit XML report the digest parses (larger: not read as one) */
#define SBX_DIGEST_JUNIT_FILES 4u               /* JUnit XML files runtime_execute's arguments name that sbxd reads */
#define SBX_DIGEST_JUNIT_FILES_BYTES (8u << 20) /* bytes of them together (with the streams' defaults, under SBX_REPLY_IN_FD_MAX) */
#define SBX_QUERY_TERMS_MAX 32u                 /* runtime_query_output queryTerms */
#define SBX_QUERY_EXCERPTS_DEFAULT 10u
#define SBX_QUERY_EXCERPTS_MAX 50u
#define SBX_QUERY_CONTEXT_DEFAULT 3u
#define SBX_QUERY_CONTEXT_MAX 20u
#define SBX_QUERY_RANGE_MAX_LINES 1000u         /* lines one lineRange returns at most */
#define SBX_QUERY_TEXT_BUDGET (48u * 1024u)     /* bytes of excerpt text in one reply */
#define SBX_QUERY_CHUNK_BYTES (1u << 20)        /* bytes of lines read at once while scanning (one line at least) */
#define SBX_QUERY_CHUNK_LINES 16384u            /* and lines at most */
#define SBX_QUERY_WINDOW_MAX_LINES 50u          /* lines of one excerpt at most (adjacent matches join) */
#define SBX_QUERY_FALLBACK_LINES 20u            /* noMatchFallback: the last lines of each stream searched */

/* Sandbox defaults */
#define SBX_MEMORY_DEFAULT (1ull << 30)
#define SBX_PIDS_DEFAULT 512u
#define SBX_MEMORY_MIN (16ull << 20)            /* default_memory_bytes, sandboxes_memory_max */
#define SBX_PIDS_MIN 8u                         /* default_pids_max, sandboxes_pids_max */
/* A sandbox's CPU weight against the others (sbxctl sandbox create
 * --cpu-weight; cgroup cpu.weight, v1 cpu.shares = weight x 1024 / 100). */
#define SBX_CPU_WEIGHT_DEFAULT 100u
#define SBX_CPU_WEIGHT_MAX 10000u
/* The cgroup above all sandboxes (sbxd.conf sandboxes_*, docs/cgroups.md):
 * what they may take of the host together. The CPU weight is against sbxd
 * itself (v2 <own>/supervisor, v1 the siblings in sbxd's own cgroup), memory
 * a percentage of the host's RAM, pids of kernel.pid_max. */
#define SBX_SANDBOXES_CPU_WEIGHT_DEFAULT 100u
#define SBX_SANDBOXES_MEMORY_PERCENT_DEFAULT 80u
#define SBX_SANDBOXES_PIDS_PERCENT_DEFAULT 50u
#define SBX_SESSION_DISK_DEFAULT (1ull << 30)   /* tmpfs size of a session's writes */

/* Files (issue 3) */
#define SBX_FILE_MAX (16ull << 20)              /* file_write content, file_edit edits, a file edited */
#define SBX_FILE_READ_DEFAULT_LINES 2000u
#define SBX_FILE_READ_MAX_LINES 2000u
#define SBX_DIFF_MAX_BYTES (96u * 1024u)        /* unified diff in one reply */
/* The attribution diff's budget: a changed region (the lines between the
 * texts' common start and end) with more old and new lines together than
 * this is owned by the publisher as a whole instead of being diffed; a
 * shuffled region of this size (50,000 lines each side) diffs in about 0.1 s
 * on the 2-core build machine, 200,000 each side in 0.65 s (issue 15). */
#define SBX_BLAME_DIFF_LINES_MAX 100000u
#define SBX_PATH_MAX 4096u
#define SBX_PATH_SHOWN_MAX 160u                 /* bytes of a path quoted in a message (start ... end) */
#define SBX_TREE_DEPTH_MAX 256u                 /* directory levels of a layer: deeper trees are refused */
#define SBX_SOURCE_DIR_MAX 4095u                /* bytes of a sandbox's source directory (PATH_MAX - 1) */
#define SBX_PUBLISH_MAX_PATHS 1000000u          /* changed paths in one publication */
#define SBX_CONFLICTS_REPORTED 100u             /* conflicting paths named in one answer */
/* Layer quotas (sbxd.conf sandbox_layers_max_bytes, owner_layers_max_bytes,
 * layers_max_inodes, state_reserve; issue 15): what published layers may
 * take, counted in allocated bytes (st_blocks) and inodes. */
#define SBX_SANDBOX_LAYERS_MAX_DEFAULT (8ull << 30)     /* one sandbox's published layers */
#define SBX_OWNER_LAYERS_MAX_DEFAULT (32ull << 30)      /* all sandboxes of one owner */
#define SBX_LAYERS_MAX_INODES_DEFAULT 4000000ull        /* published layers of all sandboxes */
#define SBX_STATE_RESERVE_DEFAULT (1ull << 30)          /* free space a publication leaves on the state fs */
#define SBX_LAYER_FSYNC_MAX 64u                 /* files and directories a layer fsyncs; a larger one syncfs */
#define SBX_RESERVE_CHECK_BYTES (16u << 20)     /* a layer's copy looks at the free space after this much */
#define SBX_RESERVE_CHECK_ENTRIES 1024u         /* ... and after this many entries */
#define SBX_STACK_MAX_LAYERS 48u                /* above this many lowers, publication compacts */
#define SBX_LAYERS_LISTED 1000u                 /* layers in one list_layers reply; the client asks for the rest */
#define SBX_MAX_SESSIONS_PER_SANDBOX 64u        /* live managed + automatic sessions */
#define SBX_SPARES_DEFAULT 2u                   /* sbxd.conf session_spares: per sandbox */
#define SBX_SPARES_MAX 8u
#define SBX_SPARE_IDLE_DEFAULT_S 120u           /* sbxd.conf session_spare_idle_seconds */
#define SBX_FILE_INDEX_CACHE_ENTRIES 256u       /* snapshot and live files whose line index file_read keeps */
#define SBX_FILE_INDEX_CACHE_BYTES (4u << 20)   /* bytes of those indexes' line marks together */
/* Work off the event loop (issue 15): publications, diffs and file indexes
 * run on threads, one lane (queue) per sandbox, one thread per busy lane. */
#define SBX_WORK_THREADS_MAX 32u                /* threads at most: sandboxes busy at once beyond it wait */
#define SBX_WORK_STOP_WAIT_MS 200u              /* at SIGTERM, running works get this long, then are left */
/* sbx.db's page cache (PRAGMA cache_size, KiB): a 20,000-path publication
 * records in 0.19 s with it, 0.25 s with SQLite's default 2 MiB. */
#define SBX_STORE_CACHE_KIB 65536
/* Rows of a publication's record (its paths, its attribution changes, their
 * folding into the records) written per transaction, off the loop: the
 * loop's own writes wait for at most one such transaction (core/publish.h). */
#define SBX_STORE_WRITE_ROWS 2000u
#define SBX_STORE_BUSY_POLL_US 1000u            /* a connection waiting for another's write looks this often */
#define SBX_STORE_BUSY_MS 2000u                 /* and gives up (-EBUSY) after this long */
#define SBX_STORE_WRITE_GAP_US 2000u            /* a publication's record leaves this between its transactions */
/* WAL pages after which sbxd's loop connection has the WAL checkpointed off
 * the loop (SQLite's own checkpoint at that size would run in the commit). */
#define SBX_STORE_CHECKPOINT_PAGES 1000u
/* sbx.db connections of each kind (reader, writer) kept for reuse off the
 * loop (data/store.h StoreConns): one publication per busy sandbox at a time. */
#define SBX_STORE_CONNS_KEPT 4u
#define SBX_TEST_HOLD_POLL_US 10000u         /* SBX_TEST_HOLD_RECORD (sbxd(8)) is looked at this often */

/* Claims: the lifecycle set's sandboxes (issue 16) */
#define SBX_CLAIM_NAME_MAX 63u                  /* namespace and claim names: [a-z0-9-], as Kubernetes names */
#define SBX_CLAIMS_PER_USER_DEFAULT 16u         /* sbxd.conf claims_per_user (root exempt) */
#define SBX_CLAIM_SHUTDOWN_DEFAULT_S 300u       /* create_sandbox shutdown_after_seconds default */
#define SBX_CLAIM_READY_TIMEOUT_DEFAULT_S 180u  /* create_sandbox sandbox_ready_timeout default */
#define SBX_CLAIM_READY_TIMEOUT_MAX_S 3600u
#define SBX_CLAIM_EXEC_TIMEOUT_DEFAULT_S 60u    /* execute_command timeout default */
#define SBX_CLAIM_EXEC_TIMEOUT_MAX_S 600u
#define SBX_CLAIM_FILE_TIMEOUT_DEFAULT_S 60u    /* the file tools' timeout default */
#define SBX_CLAIM_OUTPUT_MIN 128u               /* execute_command max_output_chars bounds and default */
#define SBX_CLAIM_OUTPUT_MAX 300000u
#define SBX_CLAIM_OUTPUT_DEFAULT 30000u
#define SBX_CLAIM_FILE_MAX (64ull << 20)        /* upload_file and download_file content, decoded */
#define SBX_CLAIM_RESULT_MAX (96u << 20)        /* a download_file result line: 64 MiB as base64 and JSON */
#define SBX_CLAIM_TEXT_BLOCK_MAX (8u << 20)     /* download_file text shown in the text block too */
#define SBX_CLAIM_LIST_DEFAULT 1000u            /* list_files max_entries default and maximum */
#define SBX_CLAIM_LIST_MAX 10000u
#define SBX_CLAIM_LABELS_MAX 64u                /* labels, pod_labels, pod_annotations: entries each */
#define SBX_CLAIM_LABEL_KEY_MAX 253u
#define SBX_CLAIM_LABEL_VALUE_MAX 63u           /* labels and pod_labels */
#define SBX_CLAIM_ANNOTATION_MAX 4096u          /* a pod annotation's value */
#define SBX_CLAIM_LIFETIME_MAX_DEFAULT_S 0u     /* sbxd.conf claim_max_lifetime: 0 = no cap */
#define SBX_CLAIM_TOMBSTONES_MAX 4096u          /* expired or deleted claims get_sandbox_status remembers */
#define SBX_TEMPLATES_MAX 64u                   /* [template NAME] sections of sbxd.conf */
#define SBX_TEMPLATE_WARM_MAX 32u               /* warm claims kept ready per template */
#define SBX_WARM_RETRY_MIN_S 5u                 /* a template's warm claim failed: next try after this, */
#define SBX_WARM_RETRY_MAX_S 600u               /* doubled at each failure in a row, at most this */
#define SBX_REPLY_IN_FD_MAX (16u << 20)         /* a reply packed into a memfd (Reply.in_fd) */

/* Boxes: the boxes set (issue 21, supervisor/core/box.h) */
#define SBX_BOX_IMAGE_DEFAULT "browser"         /* sbxd.conf box_image */
#define SBX_BOX_SPARES_DEFAULT 1u               /* sbxd.conf box_spares: warm boxes kept ready */
#define SBX_BOX_SPARES_MAX 32u
#define SBX_BOXES_PER_USER_DEFAULT 3u           /* sbxd.conf boxes_per_user (root exempt; the seed's free plan) */
#define SBX_BOX_IDLE_TIMEOUT_DEFAULT_MS (30u * 60000u) /* sbxd.conf box_idle_timeout_min: 30 */
#define SBX_BOX_IDLE_TIMEOUT_MAX_MS (30u * 86400000u)  /* idleTimeoutMin at most 30 days */
#define SBX_BOX_ID_PREFIX "box-"                /* a box's id: the prefix and 12 hex digits */
#define SBX_BOX_ID_HEX 12u
#define SBX_BOX_SERVICES_MAX 32u                /* sandbox_start services */
#define SBX_BOX_SECRETS_MAX 64u                 /* sandbox_start secrets (names) */
#define SBX_BOX_SECRET_NAME_MAX 64u
#define SBX_BOX_URL_MAX 2048u                   /* externalBaseUrl */
#define SBX_BOX_ENV_MAX 80u                     /* variables a box adds to its commands' environment */
#define SBX_BOX_EXEC_TIMEOUT_DEFAULT_S 60u      /* sandbox_exec timeoutSec default */
#define SBX_BOX_LAUNCH_TIMEOUT_S 30u            /* a background command's launcher, at most */
#define SBX_BOX_WORKDIR "/work"                 /* a box's working directory */
#define SBX_BOX_DISPLAY ":99"                   /* Xvfb's display in a box whose image has /usr/bin/Xvfb */
#define SBX_BOX_SCREEN "1280x800x24"            /* its screen */

/* Jobs: the script set's sandbox_script and its job tools (issue 18, core/job.h) */
#define SBX_SCRIPT_INPUTS_MAX 16u               /* files + directories of one call: one fd each in its frame */
#define SBX_SCRIPT_ROOTS_MAX 32u                /* sbxd.conf script_allowed_paths entries */
#define SBX_SCRIPT_RUNTIME_MAX_S (48u * 3600u)  /* the seed's explicit 48 h runtime limit: then timed_out */
#define SBX_SCRIPT_WAIT_DEFAULT_S 1800u         /* sandbox_wait timeout_seconds default and maximum (the seed's) */
#define SBX_SCRIPT_WAIT_MAX_S 172800u
#define SBX_SCRIPT_STDERR_TAIL (16u << 10)      /* the result's stderr: the last 16 KiB (the seed's) */
#define SBX_SCRIPT_STDOUT_MAX_DEFAULT (64u << 10) /* sbxd.conf script_stdout_max: stdout's head and tail */
#define SBX_SCRIPT_STDOUT_MAX_MAX (4u << 20)    /* ... at most (a result line is at most 10 MiB) */
#define SBX_SCRIPT_OUTPUT_TTL_DEFAULT_S (7u * 86400u) /* sbxd.conf script_output_ttl: outputs kept this long */
#define SBX_JOBS_MAX_DEFAULT 64u                /* sbxd.conf jobs_max: running jobs of all owners */
#define SBX_JOBS_MAX_MAX 1024u
#define SBX_OWNER_JOBS_MAX_DEFAULT 8u           /* sbxd.conf owner_jobs_max: running jobs of one uid */
#define SBX_OWNER_JOBS_KEPT_MAX 1000u           /* ended jobs of one uid kept; the oldest goes first */
#define SBX_JOB_SWEEP_S 60u                     /* how often expired outputs are looked for */
/* A job's spare (core/job.h): a sandbox and its session made ahead for the
 * next job of the same image and egress policy, used once. */
#define SBX_SCRIPT_SPARES_DEFAULT 2u            /* sbxd.conf script_spares: per image and policy */
#define SBX_SCRIPT_SPARES_MAX 4u
#define SBX_SCRIPT_SPARES_TOTAL_MAX 8u          /* spares of all images and policies together */

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

/* Egress (issue 18, docs/egress.md): the package hosts sbxd.conf's
 * egress_package_hosts and its "auto" discovery name together, and the bytes
 * of one host name (a DNS name is at most 253). */
#define SBX_EGRESS_HOSTS_MAX 256u               /* entries of the package-managers allowlist */
#define SBX_EGRESS_HOST_MAX 253u                /* bytes of one host name */
#define SBX_EGRESS_ALIASES_MAX 32u              /* name aliases of one session (a box's services wired external) */
#define SBX_EGRESS_CONFIG_FILE_MAX (256u << 10) /* bytes read of one apt/npm/pip configuration file */
#define SBX_EGRESS_CONFIG_FILES_MAX 128u        /* files read of sources.list.d */
/* sbx-egress (sbx-egress(8)): its connections and their clocks. A client
 * that has not sent its whole request head within the handshake time is
 * dropped (one byte a second never keeps a connection), as is a relay with
 * no byte either way for the idle time. */
#define SBX_EGRESS_PORT 3128                    /* 127.0.0.1:PORT in each session with a policy other than none */
#define SBX_EGRESS_HEADER_MAX 8192u             /* bytes of a request head */
#define SBX_EGRESS_HEADERS_MAX 100u             /* header lines of a request head */
#define SBX_EGRESS_CONNS_PER_SANDBOX 64u        /* open connections of one sandbox's sessions */
#define SBX_EGRESS_CONNS_MAX 1024u              /* open connections of all sandboxes */
#define SBX_EGRESS_HANDSHAKE_S 10u              /* seconds from accept to a connected upstream */
#define SBX_EGRESS_IDLE_S 300u                  /* seconds a relay may carry nothing */
#define SBX_EGRESS_PIPE_BYTES (1u << 20)        /* each direction's splice pipe (F_SETPIPE_SZ, if allowed) */
#define SBX_EGRESS_AUDIT_MAX 64u                /* host:port entries of each list of a command's egress audit */
#define SBX_EGRESS_MESSAGES_PER_WAKE 64u        /* sbx-egress messages sbxd reads before it serves others */
#define SBX_EGRESS_RESTART_MAX_S 30u            /* sbxd restarts a failed sbx-egress after 1, 2, 4 ... up to this */
/* Bearer tokens and sbx-gateway (issue 20, sbx-gateway(8)). A token is
 * SBX_TOKEN_PREFIX and SBX_TOKEN_SECRET_HEX random hex digits (256 bits);
 * sbxd keeps its SHA-256 only. */
#define SBX_TOKEN_PREFIX "sbx_pat_"
#define SBX_TOKEN_SECRET_HEX 64u                /* hex digits after the prefix */
#define SBX_TOKENS_MAX 1024u                    /* tokens sbxd keeps */
#define SBX_TOKEN_NAME_MAX 64u                  /* bytes of a token's name */
#define SBX_TOKEN_SETS_MAX 128u                 /* bytes of its tool set list */
#define SBX_TOKEN_EXPIRES_MAX_S (10ll * 366 * 86400) /* --expires at most about ten years */
#define SBX_GATEWAY_CLIENTS_MAX 512u            /* sbxd.sock connections of the gateway user, apart from
                                                   SBX_MAX_CLIENTS: one per open MCP session */
#define SBX_GATEWAY_BODY_MAX (4u << 20)         /* gateway: bytes of a POST body */
#define SBX_GATEWAY_SESSIONS_MAX 400u           /* gateway: MCP sessions open at once */
#define SBX_GATEWAY_SESSIONS_PER_TOKEN_DEFAULT 256u /* gateway.conf sessions_per_token */
#define SBX_GATEWAY_IDLE_DEFAULT_S 1800u        /* gateway.conf session_idle_seconds: a session with no
                                                   request this long ends (DELETE's effect) */
#define SBX_GATEWAY_RATE_DEFAULT 50u            /* gateway.conf requests_per_second per token (burst: 2x) */
#define SBX_GATEWAY_STREAMS_PER_SESSION 1u      /* GET /mcp streams open per session (409 for more) */
#define SBX_GATEWAY_STREAM_EVENTS 256u          /* gateway: notifications a session keeps for its GET stream,
                                                   sent or not: what a GET with Last-Event-ID can replay */
#define SBX_GATEWAY_CONNECTION_TIMEOUT_S 30u    /* gateway: an idle HTTP connection is closed */
#define SBX_GATEWAY_THREADS_MAX 1024u           /* gateway: connections (one thread each) at once */
#define SBX_GATEWAY_LISTEN_MAX 8u               /* gateway: --listen addresses */
#define SBX_GATEWAY_ORIGINS_MAX 16u             /* gateway.conf allowed_origin entries */
#define SBX_GATEWAY_EVENTS_BATCH 64u            /* gateway: ready sbxd connections taken per epoll_wait */
#define SBX_GATEWAY_PEM_MAX (1u << 20)          /* bytes of tls_certificate or tls_key */
#define SBX_GATEWAY_PUBLIC_URL_MAX 256u         /* bytes of gateway.conf public_url */
#define SBX_GATEWAY_URL_MAX 512u                /* the URL the gateway tells sbxd it is reached at (public_url, or scheme://Host) */
/* The boxes set's files and pictures (issue 21 part D, docs/boxes.md). */
#define SBX_BOX_SYNC_MAX (256ull << 20)         /* sandbox_sync: bytes of the tar the broker sends */
#define SBX_BOX_SYNC_ENTRIES_MAX 100000u        /* sandbox_sync: files, directories and symlinks in it */
#define SBX_BOX_SYNC_DEPTH_MAX 64u              /* sandbox_sync: directory levels below localPath */
#define SBX_BOX_FILE_MAX (256ull << 20)         /* sandbox_get, sandbox_shot: bytes of a file placed */
#define SBX_BOX_FILE_TTL_S 3600u                /* a placed file is removed this long after it was made */
#define SBX_BOX_FILES_SWEEP_S 60u               /* how often expired placed files are looked for */
#define SBX_BOX_FILES_PER_UID 256u              /* placed files one uid holds; the oldest goes first */
#define SBX_BOX_FILE_CMD_S 300u                 /* the tar (or picture) command in the box at most */
#define SBX_BOX_SHOT_WIDTH 1280u                /* sandbox_shot target url: Chromium's window */
#define SBX_BOX_SHOT_HEIGHT 800u
#define SBX_BOX_SHOT_IMAGE_MAX (6u << 20)       /* sandbox_shot: a PNG this large is also image content */
/* A person's takeover of a box (issue 21, docs/boxes.md "Takeover"). */
#define SBX_TAKEOVER_MAX_DEFAULT_S 1800u        /* sbxd.conf takeover_max_seconds: sandbox_takeover waits this
                                                   long for a person to hand the box back (the seed's 30 minutes) */
#define SBX_TAKEOVER_MAX_S 86400u               /* the most takeover_max_seconds may be */
#define SBX_TAKEOVER_PROGRESS_S 15u             /* a waiting sandbox_takeover with a progressToken is told
                                                   this often that it still waits (MCP clients time out
                                                   requests without progress, often after 60 s) */
#define SBX_TAKEOVER_CAP_HEX 32u                /* hex digits of a box's takeover capability (128 bits) */
#define SBX_TAKEOVER_NOTE_MAX 4096u             /* bytes of the agent's note and of the person's */
#define SBX_TERMINAL_SIZE_MAX 4096u             /* rows and columns of a takeover terminal */
#define SBX_TERMINAL_INPUT_MAX 4096u            /* bytes of keys per TERMINAL frame from sbxctl */
#define SBX_TERMINAL_BACKLOG 16u                /* output frames queued for a slow terminal client; more
                                                   output is dropped (and said so) rather than dropping it */
#define SBX_TERMINAL_DEFAULT_ROWS 24u           /* a TAKEOVER_ATTACH without a size */
#define SBX_TERMINAL_DEFAULT_COLS 80u
/* Secrets of the boxes set (issue 21, docs/boxes.md). A value goes into the
 * environment of each command of a box, in one exec frame with the command
 * (SBX_CMD_MAX) and the fixed and image variables: SBX_BOX_SECRET_VALUES_MAX values
 * of SBX_SECRET_VALUE_MAX keep that under SBX_FRAME_MAX. A value shorter than
 * SBX_SECRET_VALUE_MIN would turn everyday output into [secret:NAME] marks. */
#define SBX_SECRET_NAME_MAX 64u                 /* bytes of a secret's name (an environment variable's) */
#define SBX_SECRET_VALUE_MIN 4u                 /* bytes of a value, at least */
#define SBX_SECRET_VALUE_MAX 4096u              /* bytes of a value, at most */
#define SBX_SECRETS_PER_OWNER_MAX 256u          /* secrets of one uid */
#define SBX_BOX_SECRET_VALUES_MAX 8u            /* secrets one box may have (sandbox_start's secrets) */
/* Versions of the boxes set (issue 21, core/version.h). */
#define SBX_VERSION_ID_SIZE 17u                 /* "ver-" and 12 hex digits, NUL */
#define SBX_VERSION_TEXT_MAX 1024u              /* bytes of its service, label, image, gitSha or note */
#define SBX_VERSIONS_LISTED_MAX 1024u           /* versions one listing shows */
/* Layers of one version: each publication of a box started from a version adds
 * one over its version's (a fork of a fork...). Every one is a lower of the
 * /work overlay of a box started from it; overlayfs takes 500, and a chain
 * this long is better published again from a fresh box. */
#define SBX_VERSION_LAYERS_MAX 64u
