WORKER_SRCS += worker/worker.c
WORKER_SRCS += worker/worker-exec.c
WORKER_SRCS += worker/session-init.c
