COMMON_SRCS += common/log.c
COMMON_SRCS += common/fd-util.c
