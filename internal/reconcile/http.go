package reconcile

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// postForm POSTs form to u as contentType and returns the answer's body
// and headers (the client's transport bounds its size); an answer other
// than 200 is ErrRefused. Alipay's gateway and Kuaidi100's query are both asked so.
func postForm(ctx context.Context, hc *http.Client, u, contentType string, form url.Values) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	res, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%w: HTTP %d", ErrRefused, res.StatusCode)
	}
	return body, res.Header, nil
}
