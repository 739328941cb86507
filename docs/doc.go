// Package docs holds callgate's documentation and the tests that keep it
// true to the code: docs/configuration.md's table lists exactly the
// environment variables something reads, and every relative link of
// README.md and docs/ leads to a file and a heading that exist.
package docs
