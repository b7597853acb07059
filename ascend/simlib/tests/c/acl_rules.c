/*
 * The copy rules of CANN's IPC memory-sharing page, checked by a program that
 * knows only the CANN C prototypes (declared below as the CANN documentation
 * gives them; no kpccl header). Run against any libascendcl.so.
 *
 * The exporter (parent, device 0) allocates two blocks, one with the P2P
 * policy ACL_MEM_MALLOC_HUGE_FIRST_P2P and one with ACL_MEM_MALLOC_HUGE_FIRST,
 * fills them and exports both without a PID whitelist. Then:
 * - an importer on device 1 checks: an async copy before peer access is
 *   refused; no inferred kind; no Host->Device or Device->Host copy of the
 *   imported memory, synchronous or asynchronous; no synchronous copy within
 *   the imported range, but the asynchronous one works; async copies
 *   between the import and its own device memory, completed by
 *   aclrtSynchronizeStream, move the right bytes both ways; the non-P2P block
 *   imports only if argv[1] is "a2" (on "inference" products it must not);
 * - an importer on device 0 (the exporter's device) has none of these limits.
 * The exporter then sees what the importers wrote, closes and frees.
 * Output ends with "N passed, M failed" and "OK"; exit 0 iff nothing failed.
 * Every wait is bounded by alarm().
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- CANN prototypes and values (acl_base.h, acl_rt.h) ---- */
typedef int aclError;
typedef void *aclrtStream;
#define ACL_SUCCESS 0
#define ACL_MEM_MALLOC_HUGE_FIRST 0
#define ACL_MEM_MALLOC_HUGE_FIRST_P2P 3
#define ACL_MEMCPY_HOST_TO_DEVICE 1
#define ACL_MEMCPY_DEVICE_TO_HOST 2
#define ACL_MEMCPY_DEVICE_TO_DEVICE 3
#define ACL_MEMCPY_DEFAULT 4
#define ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION 0x1UL
#define ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT 0x0UL
aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtMalloc(void **devPtr, size_t size, int policy);
aclError aclrtFree(void *devPtr);
aclError aclrtMallocHost(void **hostPtr, size_t size);
aclError aclrtFreeHost(void *hostPtr);
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, int kind);
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, int kind, aclrtStream stream);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags);
aclError aclrtIpcMemGetExportKey(void *devPtr, size_t size, char *key, size_t len, uint64_t flags);
aclError aclrtIpcMemImportByKey(void **devPtr, const char *key, uint64_t flags);
aclError aclrtIpcMemClose(const char *key);
/* ---- end of the CANN declarations ---- */

#define SIZE (2u << 20)
#define N 4096
#define KEY_LEN 65

static int passed, failed;

static void check(int ok, const char *what, aclError rc)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("[%d] FAILED %s (aclError %d)\n", (int)getpid(), what, rc);
    }
}

static void expect(aclError rc, int success, const char *what)
{
    check(success ? rc == ACL_SUCCESS : rc != ACL_SUCCESS, what, rc);
}

#define OK(call) expect((call), 1, #call)
#define REFUSED(call) expect((call), 0, "refused: " #call)

static void *at(void *p, size_t off)
{
    return (char *)p + off;
}

static int all(const unsigned char *b, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i] != v) {
            return 0;
        }
    }
    return 1;
}

/* Device 1, another device than the exporter's: every rule. */
static void cross_device(const char *key, const char *plain_key, int inference)
{
    aclError rc;
    void *q = NULL, *local = NULL, *pinned = NULL, *plain = NULL;
    aclrtStream s = NULL;
    unsigned char host[N];
    OK(aclrtSetDevice(1));
    OK(aclrtIpcMemImportByKey(&q, key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT));
    OK(aclrtMalloc(&local, N, ACL_MEM_MALLOC_HUGE_FIRST_P2P));
    OK(aclrtMallocHost(&pinned, N));
    OK(aclrtCreateStream(&s));
    if (q == NULL || local == NULL || pinned == NULL) {
        return;
    }
    /* P2P must be enabled between the two devices. */
    REFUSED(aclrtMemcpyAsync(local, N, q, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    OK(aclrtDeviceEnablePeerAccess(0, 0));
    /* No automatic direction; no Host<->Device copies, synchronous or asynchronous. */
    REFUSED(aclrtMemcpy(local, N, q, N, ACL_MEMCPY_DEFAULT));
    REFUSED(aclrtMemcpyAsync(local, N, q, N, ACL_MEMCPY_DEFAULT, s));
    REFUSED(aclrtMemcpy(q, N, host, N, ACL_MEMCPY_HOST_TO_DEVICE));
    REFUSED(aclrtMemcpyAsync(q, N, pinned, N, ACL_MEMCPY_HOST_TO_DEVICE, s));
    REFUSED(aclrtMemcpy(host, N, q, N, ACL_MEMCPY_DEVICE_TO_HOST));
    REFUSED(aclrtMemcpyAsync(pinned, N, q, N, ACL_MEMCPY_DEVICE_TO_HOST, s));
    /* Within one device: synchronous refused, asynchronous supported. */
    REFUSED(aclrtMemcpy(at(q, 8192), N, q, N, ACL_MEMCPY_DEVICE_TO_DEVICE));
    OK(aclrtMemcpyAsync(at(q, 8192), N, q, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    /* The import to this device's memory and on to the host, in stream order. */
    OK(aclrtMemcpyAsync(local, N, at(q, 8192), N, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    OK(aclrtMemcpyAsync(pinned, N, local, N, ACL_MEMCPY_DEVICE_TO_HOST, s));
    OK(aclrtSynchronizeStream(s));
    check(all(pinned, N, 0x5a), "the exporter's bytes, read through async copies", 0);
    /* And back: host -> own device memory -> the import. */
    memset(pinned, 0xc3, N);
    OK(aclrtMemcpyAsync(local, N, pinned, N, ACL_MEMCPY_HOST_TO_DEVICE, s));
    OK(aclrtMemcpyAsync(q, N, local, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    OK(aclrtSynchronizeStream(s));
    /* Memory without a P2P policy: inference products do not map it on another device. */
    rc = aclrtIpcMemImportByKey(&plain, plain_key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT);
    check(inference ? rc != ACL_SUCCESS : rc == ACL_SUCCESS, "import of the non-P2P block", rc);
    if (rc == ACL_SUCCESS) {
        OK(aclrtIpcMemClose(plain_key));
    }
    OK(aclrtDestroyStream(s));
    OK(aclrtFreeHost(pinned));
    OK(aclrtFree(local));
    OK(aclrtIpcMemClose(key));
}

/* Device 0, the exporter's: no limits, synchronous copies included. */
static void same_device(const char *key)
{
    void *q = NULL;
    unsigned char host[N];
    OK(aclrtSetDevice(0));
    OK(aclrtIpcMemImportByKey(&q, key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT));
    if (q == NULL) {
        return;
    }
    memset(host, 0x77, N);
    OK(aclrtMemcpy(at(q, 3 * N), N, host, N, ACL_MEMCPY_HOST_TO_DEVICE));
    OK(aclrtMemcpy(at(q, 4 * N), N, at(q, 3 * N), N, ACL_MEMCPY_DEVICE_TO_DEVICE));
    memset(host, 0, N);
    OK(aclrtMemcpy(host, N, at(q, 4 * N), N, ACL_MEMCPY_DEFAULT));
    check(all(host, N, 0x77), "same-device synchronous round trip", 0);
    OK(aclrtIpcMemClose(key));
}

static int run_child(void (*body)(const char *, const char *, int), const char *k1, const char *k2, int inf)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        OK(aclInit(NULL));
        body(k1, k2, inf);
        OK(aclFinalize());
        printf("[%d] child: %d passed, %d failed\n", (int)getpid(), passed, failed);
        fflush(stdout);
        _exit(failed == 0 ? 0 : 1);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        return 0;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void same_device_body(const char *k1, const char *k2, int inf)
{
    (void)k2;
    (void)inf;
    same_device(k1);
}

int main(int argc, char **argv)
{
    void *p = NULL, *plain = NULL;
    char key[KEY_LEN], plain_key[KEY_LEN];
    unsigned char host[N];
    int inference = argc > 1 && strcmp(argv[1], "inference") == 0;
    alarm(60);
    setvbuf(stdout, NULL, _IOLBF, 0);
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtMalloc(&p, SIZE, ACL_MEM_MALLOC_HUGE_FIRST_P2P));
    OK(aclrtMalloc(&plain, SIZE, ACL_MEM_MALLOC_HUGE_FIRST));
    if (p == NULL || plain == NULL) {
        printf("%d passed, %d failed\n", passed, failed);
        return 1;
    }
    memset(host, 0x5a, N);
    OK(aclrtMemcpy(p, N, host, N, ACL_MEMCPY_HOST_TO_DEVICE));
    OK(aclrtIpcMemGetExportKey(p, SIZE, key, KEY_LEN, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION));
    OK(aclrtIpcMemGetExportKey(plain, SIZE, plain_key, KEY_LEN, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION));
    check(run_child(cross_device, key, plain_key, inference), "the importer on device 1", 0);
    check(run_child(same_device_body, key, plain_key, inference), "the importer on device 0", 0);
    OK(aclrtMemcpy(host, N, p, N, ACL_MEMCPY_DEVICE_TO_HOST));
    check(all(host, N, 0xc3), "the cross-device importer's write", 0);
    OK(aclrtMemcpy(host, N, at(p, 4 * N), N, ACL_MEMCPY_DEVICE_TO_HOST));
    check(all(host, N, 0x77), "the same-device importer's write", 0);
    OK(aclrtIpcMemClose(key));
    OK(aclrtIpcMemClose(plain_key));
    OK(aclrtFree(p));
    OK(aclrtFree(plain));
    OK(aclFinalize());
    printf("%d passed, %d failed\n", passed, failed);
    if (failed == 0) {
        printf("OK\n");
    }
    return failed == 0 ? 0 : 1;
}
