/* api.c - start/stop the client API: runtime config from the member's
 * limits, service registration. */
#include "api/api.h"

#include <stdio.h>
#include <string.h>

#include "api/api_int.h"
#include "server/server.h"
#include "util/err.h"
#include "util/mem.h"

int api_start(struct server *s, const char *listen_urls, struct api **api_out)
{
    struct api *api = mem_calloc(1, sizeof *api);
    if (api == NULL)
        return ERR_NOMEM;
    api->server = s;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", listen_urls);
    struct api_server_config cfg;
    memset(&cfg, 0, sizeof cfg);
    for (char *save, *t = strtok_r(buf, ",", &save);
         t && cfg.urls_n < API_URLS_MAX; t = strtok_r(NULL, ",", &save))
        cfg.urls[cfg.urls_n++] = t;
    cfg.max_request_bytes = server_max_request_bytes(s);
    int rc = api_server_create(&cfg, &api->rpc);
    if (rc != 0) {
        mem_free(api);
        return rc;
    }
    rc = api__kv_register(api);
    if (rc == 0)
        rc = api__maintenance_register(api);
    if (rc == 0)
        rc = api_server_start(api->rpc);
    if (rc != 0) {
        api_server_close(api->rpc);
        mem_free(api);
        return rc;
    }
    *api_out = api;
    return 0;
}

void api_stop(struct api *api)
{
    if (api == NULL)
        return;
    api_server_close(api->rpc);
    mem_free(api);
}
