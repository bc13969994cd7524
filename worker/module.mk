WORKER_SRCS += worker/worker.c
WORKER_SRCS += worker/worker-exec.c
WORKER_SRCS += worker/session-init.c
WORKER_SRCS += worker/import.c
# The tree copy of layers, for --import.
WORKER_SRCS += supervisor/data/layer.c
