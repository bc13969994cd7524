# sbx-gateway: the broker's sessions (BROKER_LIB_SRCS) over MCP Streamable HTTP.
GATEWAY_SRCS += gateway/gateway.c
GATEWAY_SRCS += gateway/http.c
GATEWAY_SRCS += gateway/sessions.c
GATEWAY_SRCS += gateway/takeover.c

# The takeover page's files as C strings (gateway-page.h: takeover_page_html, _js, _css).
GATEWAY_PAGE := gateway/takeover-page.html gateway/takeover-page.js gateway/takeover-page.css
$(GEN)/gateway-page.h: $(GATEWAY_PAGE) gateway/module.mk
	@mkdir -p $(@D)
	for f in $(GATEWAY_PAGE); do \
	  n=$$(basename $$f | tr .- __); \
	  printf 'static const char %s[] =\n' "$$n"; \
	  sed 's/\\/\\\\/g; s/"/\\"/g; s/^/        "/; s/$$/\\n"/' $$f; \
	  printf '        ;\n'; \
	done >$@.tmp && mv $@.tmp $@
$(OBJ)/gateway/http.o: $(GEN)/gateway-page.h
