/*
 * late_pull -- an LD_PRELOAD shim for tests: once armed (the program calls late_pull_arm(ms),
 * found with dlsym), the next process_vm_readv of 8 KiB or more waits `ms` milliseconds before
 * it reads. A receiver copying a message out of its sender's memory then looks as if it was
 * stopped (SIGSTOP, a debugger) between finding the message and copying it: its sender may
 * give up meanwhile (TUTTI_TIMEOUT) and write its buffer again.
 */
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static volatile int armed_ms;

#define SHIM_API __attribute__((visibility("default"))) /* (the build hides symbols) */

SHIM_API void late_pull_arm(int ms);
SHIM_API void late_pull_arm(int ms)
{
    armed_ms = ms;
}

SHIM_API ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long liovcnt,
                                  const struct iovec *remote, unsigned long riovcnt,
                                  unsigned long flags)
{
    size_t bytes = 0;

    for (unsigned long i = 0; i < liovcnt; i++)
        bytes += local[i].iov_len;
    if (armed_ms > 0 && bytes >= 8192) {
        int ms = armed_ms;
        armed_ms = 0;
        nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
    }
    return syscall(SYS_process_vm_readv, pid, local, liovcnt, remote, riovcnt, flags);
}
