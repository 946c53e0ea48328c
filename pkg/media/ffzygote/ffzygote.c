// ffzygote: a fork server for ffmpeg and ffprobe (pkg/media/zygote.go).
//
// Debian's ffmpeg loads 215 shared libraries and binds every symbol at
// start (BIND_NOW): ~0.13 CPU-s before it reads a byte, ~0.3 on a loaded
// machine, more than the whole work on a short clip. Preloaded into ffmpeg
// with DUBFLOW_ZYGOTE_FD set, this library lets the dynamic loader and
// libc finish as usual, and then, instead of ffmpeg's main, serves the
// control socket on that descriptor (a SOCK_SEQPACKET socket of the Go
// worker). Each request carries, as SCM_RIGHTS, a reply socket and the
// job's stdin, stdout and stderr; the reply socket then carries the job's
// working directory and arguments (a length, then NUL-terminated strings).
// The server forks; the child takes the streams and the directory and
// runs ffmpeg's own main with the arguments, so every job is still a
// process of its own (a crash or a kill ends that job only) that dies with
// the server (PR_SET_PDEATHSIG). The server answers with the child's pid
// and, when it has been reaped, its wait status. A reply socket that the
// caller shuts or closes kills its job (a cancelled context). The server
// ends when the control socket closes: when the worker ends.
//
// What all jobs share: the address layout (one ASLR draw for the server's
// life, as Android's zygote) and the environment of the worker when it
// started the server.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*main_fn)(int, char **, char **);
static main_fn real_main;
static int control_fd = -1;
static int signal_fd = -1;

#define MAX_JOBS 256
#define MAX_ARGS (1 << 20)

struct job {
	pid_t pid;
	int reply;
	int killed;
};
static struct job jobs[MAX_JOBS];
static int njobs;

static int read_full(int fd, void *buf, size_t n) {
	char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t n) {
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

// receive one request: the reply socket and stdin, stdout, stderr as
// SCM_RIGHTS. Returns 0, or -1 when the control socket is closed.
static int recv_request(int fds[4]) {
	char byte;
	struct iovec iov = {&byte, 1};
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {0};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = u.buf;
	msg.msg_controllen = sizeof(u.buf);
	ssize_t r;
	do
		r = recvmsg(control_fd, &msg, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(4 * sizeof(int))) {
		// Not a request: close whatever came and go on.
		if (c && c->cmsg_type == SCM_RIGHTS) {
			int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			int *got = (int *)CMSG_DATA(c);
			for (int i = 0; i < n; i++)
				close(got[i]);
		}
		fds[0] = -1;
		return 0;
	}
	memcpy(fds, CMSG_DATA(c), 4 * sizeof(int));
	return 0;
}

// run one job: read its arguments from the reply socket, fork, and in the
// child run ffmpeg's own main with them.
static void start_job(int fds[4], sigset_t *old) {
	int reply = fds[0];
	uint32_t size;
	char *blob = NULL;
	if (njobs == MAX_JOBS || read_full(reply, &size, 4) < 0 || size == 0 || size > MAX_ARGS ||
	    !(blob = malloc(size)) || read_full(reply, blob, size) < 0 || blob[size - 1] != 0) {
		goto fail;
	}
	// blob: cwd \0 arg0 \0 arg1 \0 ...
	int argc = -1;
	for (uint32_t i = 0; i < size; i++)
		if (blob[i] == 0)
			argc++;
	char **argv = calloc((size_t)argc + 1, sizeof(char *));
	if (!argv)
		goto fail;
	char *p = blob + strlen(blob) + 1;
	for (int i = 0; i < argc; i++) {
		argv[i] = p;
		p += strlen(p) + 1;
	}
	pid_t server = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		free(argv);
		goto fail;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != server) // the server ended before the line above
			_exit(125);
		sigprocmask(SIG_SETMASK, old, NULL);
		signal(SIGCHLD, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		if (dup2(fds[1], 0) < 0 || dup2(fds[2], 1) < 0 || dup2(fds[3], 2) < 0 || chdir(blob) < 0)
			_exit(126);
		close(control_fd);
		close(signal_fd);
		for (int i = 0; i < 4; i++)
			if (fds[i] > 2)
				close(fds[i]);
		for (int i = 0; i < njobs; i++)
			close(jobs[i].reply);
		exit(real_main(argc, argv, environ));
	}
	free(argv);
	free(blob);
	for (int i = 1; i < 4; i++)
		close(fds[i]);
	int32_t id = pid;
	write_full(reply, &id, 4);
	jobs[njobs].pid = pid;
	jobs[njobs].reply = reply;
	jobs[njobs].killed = 0;
	njobs++;
	return;
fail:
	free(blob);
	for (int i = 0; i < 4; i++)
		close(fds[i]);
}

static void reap(void) {
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			return;
		for (int i = 0; i < njobs; i++) {
			if (jobs[i].pid != pid)
				continue;
			int32_t st = status;
			write_full(jobs[i].reply, &st, 4);
			close(jobs[i].reply);
			jobs[i] = jobs[--njobs];
			break;
		}
	}
}

static int serve(int argc, char **argv, char **envp) {
	(void)argc;
	(void)argv;
	(void)envp;
	// No death signal for the server itself: Go may end the thread that
	// started it. The control socket closes with the worker instead, and
	// the loop below ends on that.
	sigset_t mask, old;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, &old);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	signal_fd = sfd;
	signal(SIGPIPE, SIG_IGN);
	if (sfd < 0)
		return 111;
	// The ready byte: the libraries are loaded and bound.
	char ready = 1;
	if (send(control_fd, &ready, 1, MSG_NOSIGNAL) != 1)
		return 111;
	struct pollfd pf[2 + MAX_JOBS];
	for (;;) {
		pf[0] = (struct pollfd){.fd = control_fd, .events = POLLIN};
		pf[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
		for (int i = 0; i < njobs; i++)
			pf[2 + i] = (struct pollfd){.fd = jobs[i].reply, .events = POLLRDHUP};
		int n = poll(pf, 2 + (nfds_t)njobs, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 111;
		}
		// A job whose caller hung up (or shut its writing side: a cancelled
		// context) is killed; its status is reaped on this or a later round.
		for (int i = 0; i < njobs; i++) {
			if (!jobs[i].killed && (pf[2 + i].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
				kill(jobs[i].pid, SIGKILL);
				jobs[i].killed = 1;
			}
		}
		if (pf[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) > 0) {
			}
			reap();
		}
		if (pf[0].revents & POLLIN) {
			int fds[4];
			if (recv_request(fds) < 0)
				break;
			if (fds[0] >= 0)
				start_job(fds, &old);
		} else if (pf[0].revents & (POLLHUP | POLLERR)) {
			break;
		}
	}
	for (int i = 0; i < njobs; i++)
		kill(jobs[i].pid, SIGKILL);
	return 0;
}

// is_tool reports whether this program is the tool the server is for
// (DUBFLOW_ZYGOTE_TOOL, the name of its executable): a wrapper script found
// first on PATH runs its shell with the library loaded too, and that shell
// must run its script (which runs the tool, which then serves).
static int is_tool(void) {
	const char *tool = getenv("DUBFLOW_ZYGOTE_TOOL");
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (!tool || n <= 0)
		return 0;
	exe[n] = 0;
	const char *base = strrchr(exe, '/');
	return strcmp(base ? base + 1 : exe, tool) == 0;
}

int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void *stack_end) {
	typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void), void *);
	start_fn real_start = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
	const char *fd = getenv("DUBFLOW_ZYGOTE_FD");
	if (fd && *fd && is_tool()) {
		control_fd = atoi(fd);
		unsetenv("DUBFLOW_ZYGOTE_FD");
		unsetenv("DUBFLOW_ZYGOTE_TOOL");
		unsetenv("LD_PRELOAD");
		real_main = main;
		main = serve;
	}
	return real_start(main, argc, argv, init, fini, rtld_fini, stack_end);
}
