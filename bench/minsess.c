/* minsess: the physical limit for the session churn row, measured in the same
 * run as sbx. It does the least a privileged supervisor must do for an
 * isolated session, in one process with nothing else to do, N times back to
 * back (shared/research/isolation.md section 4, "pooled netns and cgroups"):
 *
 *   parent: clone(NEWNS | NEWPID | NEWUTS | NEWIPC), put the child into a
 *           cgroup made once (v1: memory, pids, cpu; v2: one directory),
 *           release it through a pipe, wait for it;
 *   child:  make / private, join a network namespace made once (lo up),
 *           tmpfs for the session, overlay root (lower /usr, upper and work
 *           on the tmpfs), /proc, tmpfs /dev with null, zero, full and urandom
 *           bind-mounted, pivot_root, sethostname, uid/gid 65534, empty
 *           bounding set and capabilities, no_new_privs, a 20-call seccomp
 *           denylist, execve /bin/true.
 *
 * Namespaces and mounts die with the child. No MCP, no protocol, no
 * worker, no transcript, no publication check: what sbx adds to this is
 * the price of its features.
 *
 *   minsess N SCRATCH_DIR  >  {"n": N, "loop_s": s, "samples": {"session": [µs, ...]}}
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *scratch;
static int netns_fd = -1;
static int release_pipe[2];
static char cgroup_dirs[3][256];
static int n_cgroups;
static volatile pid_t session_pid;      /* the session running now, if any */
static bool in_session;                 /* set in the session's process */

static void die(const char *what) {
        fprintf(stderr, "minsess: %s: %s\n", what, strerror(errno));
        if (in_session)
                _exit(1);
        exit(1); /* atexit: the session and the cgroups go */
}

static double now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t) strlen(text))
                die(path);
        close(fd);
}

/* One cgroup for every session, made once, as sbx reuses its session cgroups. */
static void cgroups_make(void) {
        static const char *const v1[][2] = {
                { "memory", "memory.limit_in_bytes" }, { "pids", "pids.max" }, { "cpu", "cpu.cfs_quota_us" },
        };
        static const char *const v1_values[] = { "536870912", "256", "100000" };
        char path[1024];

        if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
                /* v2: below our own cgroup ("0::/path" in /proc/self/cgroup). */
                char own[200] = "";
                FILE *f = fopen("/proc/self/cgroup", "re");
                if (!f || fscanf(f, "0::%199s", own) != 1)
                        die("/proc/self/cgroup");
                fclose(f);
                snprintf(cgroup_dirs[0], sizeof(cgroup_dirs[0]), "/sys/fs/cgroup%s/minsess-%d",
                         strcmp(own, "/") == 0 ? "" : own, (int) getpid());
                if (mkdir(cgroup_dirs[0], 0755) < 0)
                        die(cgroup_dirs[0]);
                n_cgroups = 1;
                return;
        }
        for (int i = 0; i < 3; i++) {
                snprintf(cgroup_dirs[i], sizeof(cgroup_dirs[i]), "/sys/fs/cgroup/%s/minsess-%d", v1[i][0],
                         (int) getpid());
                if (mkdir(cgroup_dirs[i], 0755) < 0)
                        die(cgroup_dirs[i]);
                n_cgroups = i + 1;
                snprintf(path, sizeof(path), "%s/%s", cgroup_dirs[i], v1[i][1]);
                write_file(path, v1_values[i]);
        }
}

/* At exit and on SIGINT/SIGTERM (async-signal-safe): end the session, then
 * remove the cgroups it was in. */
static void cleanup(void) {
        pid_t pid = session_pid;

        if (pid > 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
        }
        for (int i = 0; i < n_cgroups; i++)
                (void) rmdir(cgroup_dirs[i]);
}

static void on_signal(int sig) {
        cleanup();
        _exit(128 + sig);
}

/* A network namespace with lo up, made once: sbx keeps a pool made ahead. */
static void netns_make(void) {
        int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), sock;
        struct ifreq ifr = { .ifr_name = "lo" };

        if (self < 0 || unshare(CLONE_NEWNET) < 0)
                die("unshare(CLONE_NEWNET)");
        netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (netns_fd < 0 || sock < 0 || ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
                die("lo");
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(sock, SIOCSIFFLAGS, &ifr) < 0)
                die("lo up");
        close(sock);
        if (setns(self, CLONE_NEWNET) < 0)
                die("setns back");
        close(self);
}

static void install_seccomp(void) {
        static const int denied[] = {
                __NR_kexec_load, __NR_init_module, __NR_finit_module, __NR_delete_module, __NR_mount,
                __NR_umount2, __NR_pivot_root, __NR_swapon, __NR_swapoff, __NR_reboot, __NR_bpf,
                __NR_perf_event_open, __NR_ptrace, __NR_keyctl, __NR_add_key, __NR_request_key,
                __NR_unshare, __NR_setns, __NR_open_by_handle_at, __NR_userfaultfd,
        };
        enum { N_DENIED = sizeof(denied) / sizeof(denied[0]) };
        struct sock_filter f[6 + N_DENIED * 2 + 1];
        struct sock_fprog prog = { .filter = f };
        unsigned n = 0;

        f[n++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
        f[n++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
        f[n++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
        f[n++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
        /* x32 numbers would slip past the list: kill. */
        f[n++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);
        f[n++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
        for (int i = 0; i < N_DENIED; i++) {
                f[n++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned) denied[i], 0, 1);
                f[n++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
        }
        f[n++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        prog.len = (unsigned short) n;
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                die("seccomp");
}

static void bind_node(const char *name) {
        char src[64], dst[64];
        int fd;

        snprintf(src, sizeof(src), "/dev/%s", name);
        snprintf(dst, sizeof(dst), "root/dev/%s", name);
        fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
                die(dst);
        close(fd);
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                die(dst);
}

static int session_child(void *unused) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct caps[2] = { 0 };
        char c;

        (void) unused;
        in_session = true;
        close(release_pipe[1]);
        if (read(release_pipe[0], &c, 1) != 1)
                _exit(2);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                die("make / private");
        if (setns(netns_fd, CLONE_NEWNET) < 0)
                die("setns net");
        if (mount("tmpfs", scratch, "tmpfs", 0, "size=256m,mode=0755") < 0 || chdir(scratch) < 0)
                die("session tmpfs");
        if (mkdir("upper", 0755) < 0 || mkdir("work", 0755) < 0 || mkdir("root", 0755) < 0)
                die("mkdir upper, work, root");
        if (mount("overlay", "root", "overlay", 0, "lowerdir=/usr,upperdir=upper,workdir=work") < 0)
                die("overlay");
        if (mkdir("root/proc", 0555) < 0 && errno != EEXIST)
                die("mkdir proc");
        if (mount("proc", "root/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                die("proc");
        if (mkdir("root/dev", 0755) < 0 && errno != EEXIST)
                die("mkdir dev");
        if (mount("tmpfs", "root/dev", "tmpfs", MS_NOSUID, "size=64k,mode=0755") < 0)
                die("dev tmpfs");
        bind_node("null");
        bind_node("zero");
        bind_node("full");
        bind_node("urandom");
        if (chdir("root") < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
            chdir("/") < 0)
                die("pivot_root");
        if (sethostname("sandbox", 7) < 0)
                die("sethostname");
        /* The bounding set while CAP_SETPCAP is still ours, up to the kernel's last. */
        for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
                        die("drop the bounding set");
        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                die("credentials");
        if (syscall(SYS_capset, &hdr, caps) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                die("capabilities");
        install_seccomp();
        execl("/bin/true", "true", (char *) NULL);
        die("execve /bin/true");
        return 1;
}

static char child_stack[256 * 1024] __attribute__((aligned(16)));

static void one_session(void) {
        char pid_text[16];
        char path[1024];
        pid_t pid;
        int status;

        if (pipe2(release_pipe, O_CLOEXEC) < 0)
                die("pipe");
        pid = clone(session_child, child_stack + sizeof(child_stack),
                    CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | SIGCHLD, NULL);
        if (pid < 0)
                die("clone");
        session_pid = pid;
        close(release_pipe[0]);
        snprintf(pid_text, sizeof(pid_text), "%d", (int) pid);
        for (int i = 0; i < n_cgroups; i++) {
                snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup_dirs[i]);
                write_file(path, pid_text);
        }
        if (write(release_pipe[1], "x", 1) != 1)
                die("release");
        close(release_pipe[1]);
        if (waitpid(pid, &status, 0) != pid)
                die("waitpid");
        session_pid = 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "minsess: session ended with status %#x\n", status);
                exit(1);
        }
}

int main(int argc, char **argv) {
        int n = argc > 1 ? atoi(argv[1]) : 0;
        double t0, t1, *samples;

        if (argc != 3 || n <= 0) {
                fprintf(stderr, "usage: minsess N SCRATCH_DIR\n");
                return 2;
        }
        scratch = argv[2];
        samples = calloc((size_t) n, sizeof(*samples));
        if (!samples)
                die("calloc");
        /* The benchmark's own mount namespace: nothing it mounts is seen outside. */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                die("private mount namespace");
        netns_make();
        atexit(cleanup);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        cgroups_make();
        for (int i = 0; i < 10; i++)    /* warm-up */
                one_session();
        t0 = now_us();
        for (int i = 0; i < n; i++) {
                double s = now_us();
                one_session();
                samples[i] = now_us() - s;
        }
        t1 = now_us();
        printf("{\"n\": %d, \"loop_s\": %.6f, \"samples\": {\"session\": [", n, (t1 - t0) / 1e6);
        for (int i = 0; i < n; i++)
                printf("%s%.1f", i ? ", " : "", samples[i]);
        printf("]}}\n");
        return 0;
}
