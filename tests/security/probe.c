/* sbx-sec-probe: run inside a sandbox by the battery (tests/security/). Each
 * subcommand makes one escape attempt with raw system calls and prints one
 * line "NAME: ok" or "NAME: ERRNO-NAME", so the battery can assert that the
 * attempt failed and how. Exit status 0 unless the probe itself is misused.
 *
 *   sbx-sec-probe syscalls          every call of the seccomp table (x86_64)
 *   sbx-sec-probe compat            a few of them, and socket families, through the
 *                                   32-bit ABI (int 0x80)
 *   sbx-sec-probe x32               one x32 call: the process must be killed
 *   sbx-sec-probe sockets           raw, packet and rare-family sockets
 *   sbx-sec-probe userns            unshare/clone of a user namespace with maps
 *   sbx-sec-probe setns PID         setns into /proc/PID/ns/{mnt,user,net}
 *   sbx-sec-probe ptrace PID...     PTRACE_ATTACH to each pid
 *   sbx-sec-probe kill PID...       kill(pid, 0) to each pid
 *   sbx-sec-probe tiocsti           TIOCSTI on stdin and on a fresh pty
 *   sbx-sec-probe fds               the open file descriptors
 *   sbx-sec-probe mknod DIR         a block and a char device node in DIR
 *   sbx-sec-probe chroot            the classic chroot escape
 *   sbx-sec-probe hostname NAME     sethostname
 *   sbx-sec-probe budgets-spend WATCHES MARKS
 *                                   take all it can of the per-user kernel budgets
 *                                   (inotify instances and WATCHES watches, fanotify
 *                                   groups and MARKS marks, message queues, queued
 *                                   signals), print "holding", keep them until a line
 *                                   comes on stdin
 *   sbx-sec-probe budgets DIR       one of each of those (marks and watches on DIR)
 *   sbx-sec-probe inotify-hold PATH watch PATH, print "watching", and at a line on
 *                                   stdin report the events seen meanwhile, then
 *                                   those of its own open of PATH
 *   sbx-sec-probe flock-hold PATH   flock(LOCK_EX) PATH until a line on stdin
 *   sbx-sec-probe flock-try PATH    flock(LOCK_EX | LOCK_NB) PATH
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <mqueue.h>
#include <poll.h>
#include <sys/fanotify.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX(a, b) ((a) > (b) ? (a) : (b))

static const char *ename(int e) {
        static char buf[32];
        const char *n = strerrorname_np(e);
        if (n)
                return n;
        snprintf(buf, sizeof(buf), "E%d", e);
        return buf;
}

static void report(const char *what, long r) {
        if (r < 0)
                printf("%s: %s\n", what, ename(errno));
        else
                printf("%s: ok\n", what);
        fflush(stdout);
}

#define TRY(what, expr) do { errno = 0; report((what), (long) (expr)); } while (0)

static void probe_syscalls(void) {
        static const struct {
                const char *name;
                long nr;
        } calls[] = {
                { "init_module", SYS_init_module }, { "finit_module", SYS_finit_module },
                { "delete_module", SYS_delete_module }, { "kexec_load", SYS_kexec_load },
                { "kexec_file_load", SYS_kexec_file_load }, { "reboot", SYS_reboot }, { "bpf", SYS_bpf },
                { "perf_event_open", SYS_perf_event_open }, { "keyctl", SYS_keyctl }, { "add_key", SYS_add_key },
                { "request_key", SYS_request_key }, { "userfaultfd", SYS_userfaultfd },
                { "open_by_handle_at", SYS_open_by_handle_at }, { "name_to_handle_at", SYS_name_to_handle_at },
                { "mount", SYS_mount }, { "umount2", SYS_umount2 }, { "pivot_root", SYS_pivot_root },
                { "chroot", SYS_chroot }, { "move_mount", SYS_move_mount }, { "open_tree", SYS_open_tree },
                { "fsopen", SYS_fsopen }, { "fsconfig", SYS_fsconfig }, { "fsmount", SYS_fsmount },
                { "fspick", SYS_fspick }, { "mount_setattr", SYS_mount_setattr }, { "setns", SYS_setns },
                { "clone3", SYS_clone3 }, { "io_uring_setup", SYS_io_uring_setup },
                { "io_uring_enter", SYS_io_uring_enter }, { "io_uring_register", SYS_io_uring_register },
                { "swapon", SYS_swapon }, { "swapoff", SYS_swapoff }, { "settimeofday", SYS_settimeofday },
                { "clock_settime", SYS_clock_settime }, { "clock_adjtime", SYS_clock_adjtime },
                { "adjtimex", SYS_adjtimex }, { "acct", SYS_acct }, { "syslog", SYS_syslog },
                { "quotactl", SYS_quotactl }, { "iopl", SYS_iopl }, { "ioperm", SYS_ioperm },
                { "lookup_dcookie", SYS_lookup_dcookie }, { "uselib", SYS_uselib }, { "ustat", SYS_ustat },
                { "sysfs", SYS_sysfs },
        };
        /* Arguments that would do harm if the call went through are all zero/NULL:
         * every one of these fails early (EFAULT/EINVAL) rather than act. */
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
                TRY(calls[i].name, syscall(calls[i].nr, 0, 0, 0, 0, 0, 0));
        TRY("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS));
        TRY("unshare(CLONE_NEWNET)", unshare(CLONE_NEWNET));
        TRY("unshare(CLONE_NEWPID)", unshare(CLONE_NEWPID));
        TRY("unshare(CLONE_NEWTIME)", unshare(CLONE_NEWTIME));
        TRY("unshare(CLONE_FILES)", unshare(CLONE_FILES)); /* allowed: no namespace */
        TRY("personality(query)", syscall(SYS_personality, 0xffffffffUL));
        TRY("personality(PER_LINUX)", syscall(SYS_personality, 0UL));
        TRY("personality(ADDR_NO_RANDOMIZE)", syscall(SYS_personality, 0x0040000UL));
        TRY("personality(READ_IMPLIES_EXEC|bit31)", syscall(SYS_personality, 0x80400000UL));
}

/* 32-bit x86 system calls from this 64-bit process: same kernel entry as an
 * i386 program (the filter sees the x86 ABI). */
static long int80(long nr, long a, long b, long c) {
        long r;
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c) : "r8", "r9", "r10", "r11", "cc", "memory");
        if (r < 0 && r > -4096) {
                errno = (int) -r;
                return -1;
        }
        return r;
}

static void probe_compat(void) {
        /* i386 numbers */
        TRY("i386 getpid (allowed)", int80(20, 0, 0, 0));
        TRY("i386 mount", int80(21, 0, 0, 0));
        TRY("i386 unshare(CLONE_NEWUSER)", int80(310, CLONE_NEWUSER, 0, 0));
        TRY("i386 socketcall", int80(102, 1, 0, 0));
        TRY("i386 socket(AF_PACKET)", int80(359, AF_PACKET, SOCK_RAW, 0));
        TRY("i386 socket(AF_VSOCK)", int80(359, AF_VSOCK, SOCK_STREAM, 0));
        TRY("i386 socket(AF_ALG)", int80(359, AF_ALG, SOCK_SEQPACKET, 0));
        TRY("i386 socket(AF_KEY)", int80(359, AF_KEY, SOCK_RAW, 2));
        TRY("i386 socket(AF_BLUETOOTH)", int80(359, AF_BLUETOOTH, SOCK_RAW, 0));
        TRY("i386 socket(AF_UNIX) (allowed)", int80(359, AF_UNIX, SOCK_STREAM, 0));
        TRY("i386 socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)", int80(359, AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT));
        TRY("i386 kexec_load", int80(283, 0, 0, 0));
        TRY("i386 bpf", int80(357, 0, 0, 0));
        TRY("i386 init_module", int80(128, 0, 0, 0));
}

static void probe_x32(void) {
        printf("x32: calling getpid through the x32 ABI\n");
        fflush(stdout);
        long r = syscall(0x40000000L | 39);
        printf("x32: survived (%ld)\n", r);
}

static void probe_sockets(void) {
        TRY("socket(AF_PACKET, SOCK_RAW)", socket(AF_PACKET, SOCK_RAW, 0));
        TRY("socket(AF_PACKET, SOCK_DGRAM)", socket(AF_PACKET, SOCK_DGRAM, 0));
        TRY("socket(AF_INET, SOCK_RAW, ICMP)", socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, 1));
        TRY("socket(AF_INET6, SOCK_RAW, ICMPV6)", socket(AF_INET6, SOCK_RAW, 58));
        TRY("socket(AF_INET, SOCK_PACKET)", socket(AF_INET, SOCK_PACKET, 0));
        TRY("socket(AF_VSOCK)", socket(AF_VSOCK, SOCK_STREAM, 0));
        TRY("socket(AF_ALG)", socket(AF_ALG, SOCK_SEQPACKET, 0));
        TRY("socket(AF_KEY)", socket(AF_KEY, SOCK_RAW, 2));
        TRY("socket(AF_BLUETOOTH)", socket(AF_BLUETOOTH, SOCK_RAW, 0));
        TRY("socket(AF_INET, SOCK_STREAM) (allowed)", socket(AF_INET, SOCK_STREAM, 0));
        TRY("socket(AF_UNIX, SOCK_STREAM) (allowed)", socket(AF_UNIX, SOCK_STREAM, 0));
        TRY("socket(AF_NETLINK, NETLINK_ROUTE) (allowed)", socket(AF_NETLINK, SOCK_RAW, 0));
        TRY("socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)", socket(AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT));
        TRY("socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT, upper bits set)",
            syscall(SYS_socket, AF_NETLINK, SOCK_DGRAM, 0x100000000L | NETLINK_KOBJECT_UEVENT));
}

/* ---- per-user kernel budgets ---------------------------------------------------- */

static void wait_line(void) {
        char buf[64];
        (void) read(0, buf, sizeof(buf));
}

/* "NAME: N held (ERRNO)": how many it got before the kernel said no. */
static void held(const char *what, long n, int err) {
        printf("%s: %ld held (%s)\n", what, n, err ? ename(err) : "no limit met");
        fflush(stdout);
}

#define BUDGET_FDS 1024
#define BUDGET_SIGNALS (1L << 21)

static void spend_notify(long watches, long marks, const char *dir) {
        static int ino[BUDGET_FDS], fan[BUDGET_FDS];
        long n_ino = 0, n_fan = 0, n_watch = 0, n_mark = 0, files;
        int err = 0;

        while (n_ino < BUDGET_FDS && (ino[n_ino] = inotify_init1(IN_CLOEXEC)) >= 0)
                n_ino++;
        held("inotify_init1", n_ino, n_ino < BUDGET_FDS ? errno : 0);
        while (n_fan < BUDGET_FDS && (fan[n_fan] = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC, O_RDONLY)) >= 0)
                n_fan++;
        held("fanotify_init", n_fan, n_fan < BUDGET_FDS ? errno : 0);
        /* Enough files that every instance watches each once and the total passes the limit. */
        files = 1 + MAX(n_ino ? watches / n_ino : 0, n_fan ? marks / n_fan : 0);
        for (long f = 0; f < files; f++) {
                char path[256];
                snprintf(path, sizeof(path), "%s/w%ld", dir, f);
                int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                if (fd >= 0)
                        close(fd);
                for (long i = 0; !err && i < n_ino; i++)
                        if (inotify_add_watch(ino[i], path, IN_OPEN) >= 0)
                                n_watch++;
                        else
                                err = errno;
        }
        held("inotify_add_watch", n_watch, err);
        err = 0;
        for (long f = 0; n_fan && f < files; f++) {
                char path[256];
                snprintf(path, sizeof(path), "%s/w%ld", dir, f);
                for (long i = 0; !err && i < n_fan; i++)
                        if (fanotify_mark(fan[i], FAN_MARK_ADD, FAN_OPEN, AT_FDCWD, path) >= 0)
                                n_mark++;
                        else
                                err = errno;
        }
        held("fanotify_mark", n_mark, err);
}

static void probe_budgets_spend(long watches, long marks) {
        static char names[BUDGET_FDS][32];
        sigset_t rt;
        long n_mq = 0, n_sig = 0;

        (void) mkdir("/tmp/sbx-budgets", 0700);
        spend_notify(watches, marks, "/tmp/sbx-budgets");
        while (n_mq < BUDGET_FDS) {
                snprintf(names[n_mq], sizeof(names[n_mq]), "/sbx-probe-%d-%ld", (int) getpid(), n_mq);
                if (mq_open(names[n_mq], O_RDWR | O_CREAT | O_EXCL, 0600, NULL) < 0)
                        break;
                n_mq++;
        }
        held("mq_open", n_mq, n_mq < BUDGET_FDS ? errno : 0);
        sigemptyset(&rt);
        sigaddset(&rt, SIGRTMIN);
        sigprocmask(SIG_BLOCK, &rt, NULL);
        /* The limit is RLIMIT_SIGPENDING, about one per 64 KiB of memory: a host so big
         * that this bound comes first is told apart ("no limit met"). */
        while (n_sig < BUDGET_SIGNALS && sigqueue(getpid(), SIGRTMIN, (union sigval) { .sival_int = 0 }) == 0)
                n_sig++;
        held("sigqueue", n_sig, n_sig < BUDGET_SIGNALS ? errno : 0);
        printf("holding\n");
        fflush(stdout);
        wait_line();
        for (long i = 0; i < n_mq; i++)
                (void) mq_unlink(names[i]);
}

/* One of each, released at once: "NAME: ok" or the errno. */
static void probe_budgets(const char *dir) {
        char name[64];
        sigset_t rt;
        siginfo_t si;
        int fd;

        fd = inotify_init1(IN_CLOEXEC);
        report("inotify_init1", fd);
        if (fd >= 0) {
                TRY("inotify_add_watch", inotify_add_watch(fd, dir, IN_OPEN));
                close(fd);
        }
        fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC, O_RDONLY);
        report("fanotify_init", fd);
        if (fd >= 0) {
                TRY("fanotify_mark", fanotify_mark(fd, FAN_MARK_ADD, FAN_OPEN, AT_FDCWD, dir));
                close(fd);
        }
        snprintf(name, sizeof(name), "/sbx-probe-check-%d", (int) getpid());
        fd = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, NULL);
        report("mq_open", fd);
        if (fd >= 0)
                (void) mq_unlink(name);
        sigemptyset(&rt);
        sigaddset(&rt, SIGRTMIN);
        sigprocmask(SIG_BLOCK, &rt, NULL);
        TRY("sigqueue", sigqueue(getpid(), SIGRTMIN, (union sigval) { .sival_int = 0 }));
        (void) sigtimedwait(&rt, &si, &(struct timespec) { 0 });
}

/* ---- shared inodes ---------------------------------------------------------------- */

static long inotify_events(int fd) {
        char buf[4096] __attribute__((aligned(8)));
        long events = 0;
        ssize_t n;

        while ((n = read(fd, buf, sizeof(buf))) > 0)
                for (char *p = buf; p < buf + n; p += sizeof(struct inotify_event) + ((struct inotify_event *) p)->len)
                        events++;
        return events;
}

/* Events while it waits come from others; then it opens PATH itself, which
 * must show (the watch works). */
static void probe_inotify_hold(const char *path) {
        int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK), own;

        if (fd < 0 || inotify_add_watch(fd, path, IN_OPEN | IN_ACCESS | IN_CLOSE_NOWRITE) < 0) {
                report("inotify_add_watch", -1);
                return;
        }
        printf("watching\n");
        fflush(stdout);
        wait_line();
        printf("inotify events of others: %ld\n", inotify_events(fd));
        own = open(path, O_RDONLY | O_CLOEXEC);
        if (own >= 0)
                close(own);
        printf("inotify events of its own: %ld\n", inotify_events(fd));
}

static void probe_flock(const char *path, bool hold) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                report("open", -1);
                return;
        }
        TRY(hold ? "flock" : "flock(LOCK_NB)", flock(fd, LOCK_EX | (hold ? 0 : LOCK_NB)));
        if (hold)
                wait_line();
        close(fd);
}

static int write_file(const char *path, const char *s) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = write(fd, s, strlen(s));
        int e = errno;
        close(fd);
        errno = e;
        return n == (ssize_t) strlen(s) ? 0 : -1;
}

static void probe_userns(void) {
        pid_t pid;
        int st;

        TRY("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER));
        TRY("unshare(CLONE_NEWUSER|CLONE_NEWNS)", unshare(CLONE_NEWUSER | CLONE_NEWNS));
        /* clone with CLONE_NEWUSER, then try to map uid 0 of the host */
        errno = 0;
        pid = (pid_t) syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0)
                _exit(0);
        if (pid > 0) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/uid_map", (int) pid);
                TRY("uid_map 0 0 1 of a new user namespace", write_file(path, "0 0 1\n"));
                waitpid(pid, &st, 0);
                printf("clone(CLONE_NEWUSER): ok\n");
        } else
                report("clone(CLONE_NEWUSER)", -1);
}

static void probe_setns(const char *pid) {
        static const char *const kinds[] = { "mnt", "user", "net", "pid", "uts", "ipc", "cgroup" };
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                char path[64], what[96];
                snprintf(path, sizeof(path), "/proc/%s/ns/%s", pid, kinds[i]);
                snprintf(what, sizeof(what), "setns %s", path);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        report(what, -1);
                        continue;
                }
                TRY(what, setns(fd, 0));
                close(fd);
        }
}

static void probe_tiocsti(void) {
        char c = 'x';
        TRY("TIOCSTI on stdin", ioctl(0, TIOCSTI, &c));
        TRY("TIOCLINUX on stdin", ioctl(0, TIOCLINUX, &c));
        TRY("open /dev/tty (controlling terminal)", open("/dev/tty", O_RDWR | O_CLOEXEC));
        int m = posix_openpt(O_RDWR | O_NOCTTY);
        if (m < 0) {
                report("posix_openpt", -1);
                return;
        }
        if (grantpt(m) < 0 || unlockpt(m) < 0) {
                report("unlockpt", -1);
                return;
        }
        int s = open(ptsname(m), O_RDWR | O_NOCTTY);
        if (s < 0) {
                report("open pty slave", -1);
                return;
        }
        TRY("TIOCSTI on a pty", ioctl(s, TIOCSTI, &c));
        TRY("TIOCSTI on a pty (upper bits set)", syscall(SYS_ioctl, s, 0xdead00000000UL | TIOCSTI, &c));
}

static void probe_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        int self = d ? dirfd(d) : -1;
        printf("fds:");
        while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.' || atoi(e->d_name) == self)
                        continue;
                char path[300], target[256] = "";
                snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
                ssize_t n = readlink(path, target, sizeof(target) - 1);
                if (n > 0)
                        target[n] = '\0';
                printf(" %s=%s", e->d_name, target);
        }
        printf("\n");
}

static void probe_mknod(const char *dir) {
        char path[512];
        snprintf(path, sizeof(path), "%s/sbx-probe-sda", dir);
        TRY("mknod block 8:0", mknod(path, S_IFBLK | 0600, makedev(8, 0)));
        snprintf(path, sizeof(path), "%s/sbx-probe-mem", dir);
        TRY("mknod char 1:1 (/dev/mem)", mknod(path, S_IFCHR | 0600, makedev(1, 1)));
        snprintf(path, sizeof(path), "%s/sbx-probe-kmsg", dir);
        TRY("mknod char 1:11 (/dev/kmsg)", mknod(path, S_IFCHR | 0600, makedev(1, 11)));
}

static void probe_chroot(void) {
        /* chroot into a subdirectory, then walk up from the old cwd */
        (void) mkdir("/tmp/sbx-chroot", 0755);
        TRY("chroot(/tmp/sbx-chroot)", chroot("/tmp/sbx-chroot"));
        for (int i = 0; i < 64; i++)
                (void) chdir("..");
        TRY("chroot(.) after walking up", chroot("."));
        TRY("access(/etc/shadow)", access("/etc/shadow", R_OK));
}

int main(int argc, char **argv) {
        if (argc < 2) {
                fprintf(stderr, "usage: sbx-sec-probe WHAT [ARGS]\n");
                return 2;
        }
        const char *w = argv[1];
        if (!strcmp(w, "syscalls"))
                probe_syscalls();
        else if (!strcmp(w, "compat"))
                probe_compat();
        else if (!strcmp(w, "x32"))
                probe_x32();
        else if (!strcmp(w, "sockets"))
                probe_sockets();
        else if (!strcmp(w, "userns"))
                probe_userns();
        else if (!strcmp(w, "setns") && argc > 2)
                probe_setns(argv[2]);
        else if (!strcmp(w, "ptrace") || !strcmp(w, "kill")) {
                for (int i = 2; i < argc; i++) {
                        char what[64];
                        pid_t pid = (pid_t) atoi(argv[i]);
                        snprintf(what, sizeof(what), "%s %d", w, (int) pid);
                        if (w[0] == 'p') {
                                TRY(what, ptrace(PTRACE_ATTACH, pid, 0, 0));
                        } else {
                                TRY(what, kill(pid, 0));
                        }
                }
        } else if (!strcmp(w, "tiocsti"))
                probe_tiocsti();
        else if (!strcmp(w, "fds"))
                probe_fds();
        else if (!strcmp(w, "mknod") && argc > 2)
                probe_mknod(argv[2]);
        else if (!strcmp(w, "chroot"))
                probe_chroot();
        else if (!strcmp(w, "hostname") && argc > 2)
                TRY("sethostname", sethostname(argv[2], strlen(argv[2])));
        else if (!strcmp(w, "budgets-spend") && argc > 3)
                probe_budgets_spend(atol(argv[2]), atol(argv[3]));
        else if (!strcmp(w, "budgets") && argc > 2)
                probe_budgets(argv[2]);
        else if (!strcmp(w, "inotify-hold") && argc > 2)
                probe_inotify_hold(argv[2]);
        else if (!strcmp(w, "flock-hold") && argc > 2)
                probe_flock(argv[2], true);
        else if (!strcmp(w, "flock-try") && argc > 2)
                probe_flock(argv[2], false);
        else {
                fprintf(stderr, "sbx-sec-probe: unknown probe '%s'\n", w);
                return 2;
        }
        return 0;
}
