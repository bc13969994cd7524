# sbx-gateway: the broker's sessions (BROKER_LIB_SRCS) over MCP Streamable HTTP.
GATEWAY_SRCS += gateway/gateway.c
GATEWAY_SRCS += gateway/http.c
GATEWAY_SRCS += gateway/sessions.c
