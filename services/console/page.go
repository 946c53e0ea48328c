package main

import (
	"net/http"

	"github.com/dubflow/dubflow/services/console/web"
)

// page is the web page (package web), served for every path not under
// /api/; storage is the object store's origin, where the page uploads
// large videos (presigned POST policy).
func page(storage string) http.Handler { return web.HandlerFor(storage) }
