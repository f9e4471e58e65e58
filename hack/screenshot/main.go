// Command screenshot takes a picture of a dashboard page for docs/images: it opens the page in
// headless Chromium, waits until a JavaScript condition holds (by default: the event stream is
// live and nothing is loading) and writes a PNG.
//
//	go run ./hack/screenshot -url http://127.0.0.1:8080/ -out docs/images/dashboard-overview.png
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/draforge/draforge/test/browser"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080/", "page to capture")
	out := flag.String("out", "", "PNG file to write")
	ready := flag.String("ready", `document.body.innerText.includes("Stream: live") && !document.body.innerText.includes("Loading")`,
		"JavaScript condition to wait for")
	width := flag.Int("width", 1280, "window width")
	height := flag.Int("height", 800, "window height")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "screenshot: -out is required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	png, err := browser.Screenshot(ctx, *url, *ready, *width, *height)
	if err == nil {
		err = os.WriteFile(*out, png, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "screenshot:", err)
		os.Exit(1)
	}
}
