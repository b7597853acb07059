/*
 * Two processes share device memory with the ACL IPC calls only:
 * the exporter (parent) allocates and exports with the PID whitelist on; the
 * importer (child) first tries before being whitelisted (expects 507899), then is
 * whitelisted, imports, checks and rewrites the data, and closes; the exporter
 * then sees the new data, closes the key and frees. Prints "OK" and exits 0.
 * Every wait is bounded by alarm().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl_ipc.h"

#define SIZE (1u << 20)
#define KEY_LEN 65

static int fail(const char *what, aclError rc) {
    fprintf(stderr, "[%d] %s: %d\n", (int)getpid(), what, rc);
    return 1;
}

static int xfer(int fd, void *buf, size_t len, int writing) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = writing ? write(fd, (char *)buf + done, len - done) : read(fd, (char *)buf + done, len - done);
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

static int importer(int rx, int tx) {
    aclError rc;
    int32_t tgid = 0;
    char key[KEY_LEN];
    void *p = NULL;
    unsigned char host[4096];
    if ((rc = aclInit(NULL)) != ACL_SUCCESS) return fail("aclInit", rc);
    if ((rc = aclrtSetDevice(0)) != ACL_SUCCESS) return fail("aclrtSetDevice", rc);
    if ((rc = aclrtDeviceGetBareTgid(&tgid)) != ACL_SUCCESS) return fail("aclrtDeviceGetBareTgid", rc);
    if (xfer(rx, key, KEY_LEN, 0)) return fail("read key", -1);
    rc = aclrtIpcMemImportByKey(&p, key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT);
    if (xfer(tx, &rc, sizeof rc, 1)) return fail("send code", -1);
    if (rc != ACL_ERROR_RT_DRV_INTERNAL_ERROR) return fail("import before whitelisting", rc);
    if (xfer(tx, &tgid, sizeof tgid, 1)) return fail("send tgid", -1);
    if (xfer(rx, &rc, sizeof rc, 0)) return fail("wait for whitelist", -1);
    if ((rc = aclrtIpcMemImportByKey(&p, key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT)) != ACL_SUCCESS)
        return fail("aclrtIpcMemImportByKey", rc);
    if ((rc = aclrtMemcpy(host, sizeof host, p, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST)) != ACL_SUCCESS)
        return fail("aclrtMemcpy D2H", rc);
    for (size_t i = 0; i < sizeof host; i++)
        if (host[i] != 0x5a) return fail("data seen by the importer", host[i]);
    memset(host, 0xa5, sizeof host);
    if ((rc = aclrtMemcpy(p, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE)) != ACL_SUCCESS)
        return fail("aclrtMemcpy H2D", rc);
    if ((rc = aclrtSynchronizeDevice()) != ACL_SUCCESS) return fail("aclrtSynchronizeDevice", rc);
    if ((rc = aclrtIpcMemClose(key)) != ACL_SUCCESS) return fail("importer aclrtIpcMemClose", rc);
    if (xfer(tx, &rc, sizeof rc, 1)) return fail("send done", -1);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}

static int exporter(int rx, int tx, pid_t child) {
    aclError rc, seen;
    int32_t tgid = 0;
    char key[KEY_LEN];
    void *p = NULL;
    unsigned char host[4096];
    int status = 0;
    if ((rc = aclInit(NULL)) != ACL_SUCCESS) return fail("aclInit", rc);
    if ((rc = aclrtSetDevice(0)) != ACL_SUCCESS) return fail("aclrtSetDevice", rc);
    if ((rc = aclrtMalloc(&p, SIZE, ACL_MEM_MALLOC_HUGE_FIRST)) != ACL_SUCCESS) return fail("aclrtMalloc", rc);
    memset(host, 0x5a, sizeof host);
    if ((rc = aclrtMemcpy(p, SIZE, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE)) != ACL_SUCCESS)
        return fail("aclrtMemcpy H2D", rc);
    if ((rc = aclrtIpcMemGetExportKey(p, SIZE, key, KEY_LEN, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)) != ACL_SUCCESS)
        return fail("aclrtIpcMemGetExportKey", rc);
    if (xfer(tx, key, KEY_LEN, 1)) return fail("send key", -1);
    if (xfer(rx, &seen, sizeof seen, 0)) return fail("read code", -1);
    printf("import before whitelisting: %d\n", seen);
    if (seen != ACL_ERROR_RT_DRV_INTERNAL_ERROR) return fail("importer's code", seen);
    if (xfer(rx, &tgid, sizeof tgid, 0)) return fail("read tgid", -1);
    if ((rc = aclrtIpcMemSetImportPid(key, &tgid, 1)) != ACL_SUCCESS) return fail("aclrtIpcMemSetImportPid", rc);
    if (xfer(tx, &rc, sizeof rc, 1)) return fail("send go", -1);
    if (xfer(rx, &rc, sizeof rc, 0)) return fail("wait for importer", -1);
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fail("importer exit", status);
    if ((rc = aclrtMemcpy(host, sizeof host, p, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST)) != ACL_SUCCESS)
        return fail("aclrtMemcpy D2H", rc);
    for (size_t i = 0; i < sizeof host; i++)
        if (host[i] != 0xa5) return fail("data written by the importer", host[i]);
    if ((rc = aclrtIpcMemClose(key)) != ACL_SUCCESS) return fail("exporter aclrtIpcMemClose", rc);
    if ((rc = aclrtFree(p)) != ACL_SUCCESS) return fail("aclrtFree", rc);
    aclrtResetDevice(0);
    aclFinalize();
    printf("OK\n");
    return 0;
}

int main(void) {
    int to_child[2], to_parent[2];
    pid_t pid;
    alarm(20);
    if (pipe(to_child) || pipe(to_parent)) return fail("pipe", -1);
    fflush(stdout);
    pid = fork();
    if (pid < 0) return fail("fork", -1);
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        _exit(importer(to_child[0], to_parent[1]));
    }
    close(to_child[0]);
    close(to_parent[1]);
    return exporter(to_parent[0], to_child[1], pid);
}
