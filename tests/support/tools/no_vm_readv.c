/*
 * no_vm_readv -- run a program where process_vm_readv fails with EPERM, as under a container
 * runtime's default seccomp profile (Docker's refuses it without CAP_SYS_PTRACE).
 *
 *   no_vm_readv RANKS PROGRAM [ARG ...]
 * RANKS: "all", or the one TUTTI_RANK the filter applies to (the other ranks run unfiltered).
 * The filter is a seccomp BPF program installed after PR_SET_NO_NEW_PRIVS; exec keeps it.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define AUDIT_ARCH_HERE AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_HERE AUDIT_ARCH_AARCH64
#endif

static int refuse_vm_readv(void)
{
#ifdef AUDIT_ARCH_HERE
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_HERE, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof(code) / sizeof(code[0])), code};

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("no_vm_readv: seccomp");
        return -1;
    }
    return 0;
#else
    fprintf(stderr, "no_vm_readv: no seccomp filter for this architecture\n");
    return -1;
#endif
}

int main(int argc, char **argv)
{
    const char *rank = getenv("TUTTI_RANK");

    if (argc < 3) {
        fprintf(stderr, "usage: no_vm_readv all|RANK PROGRAM [ARG ...]\n");
        return 2;
    }
    if ((strcmp(argv[1], "all") == 0 || (rank && strcmp(rank, argv[1]) == 0)) &&
        refuse_vm_readv() != 0)
        return 2;
    execvp(argv[2], argv + 2);
    fprintf(stderr, "no_vm_readv: %s: %s\n", argv[2], strerror(errno));
    return 127;
}
