package admin

import "github.com/gin-gonic/gin"

// mountPage adds the web page under /admin/ (see web.go).
func (h *Handler) mountPage(r *gin.Engine) {}
