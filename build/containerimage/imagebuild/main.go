// Command imagebuild builds the draforge container image without a container engine (see
// package containerimage): `go tool task image` runs it. It writes an OCI layout, pushes
// the index when --push names a registry, writes one platform as a docker-archive for
// `kind load image-archive`, or (--rootfs, the Dockerfile's build stage) only the file system.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/draforge/draforge/build/containerimage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	dir := fs.String("dir", ".", "repository root (go.mod, VERSION)")
	out := fs.String("o", "bin/image", "OCI layout directory to (re)write; empty to skip")
	push := fs.String("push", "", "push the image index to this reference (a repository alone gets the VERSION tag)")
	tarPath := fs.String("tarball", "", "also write one platform as a docker-archive tarball (for `kind load image-archive`)")
	tarRef := fs.String("tarball-ref", containerimage.DefaultRepository, "reference the tarball's image is tagged with (the VERSION tag when it has none)")
	tarPlatform := fs.String("tarball-platform", "linux/"+runtime.GOARCH, "platform of the tarball")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms of the index")
	rootfs := fs.String("rootfs", "", "only write the file system of --rootfs-platform to this directory (Dockerfile build stage)")
	rootfsPlatform := fs.String("rootfs-platform", "linux/"+runtime.GOARCH, "platform of --rootfs")
	version := fs.String("version", "", "release version (default: the VERSION file)")
	revision := fs.String("revision", "", "source revision (default: git HEAD, -dirty when tracked files changed)")
	created := fs.String("created", "", "creation time as Unix seconds (default: $SOURCE_DATE_EPOCH, else the commit time)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	src, err := source(ctx, *dir, *version, *revision, *created)
	if err != nil {
		return err
	}
	if strings.HasSuffix(src.Revision, "-dirty") {
		fmt.Fprintf(os.Stderr, "warning: tracked files differ from %s; the image is not that commit's (revision label %s)\n",
			strings.TrimSuffix(src.Revision, "-dirty"), src.Revision)
	}
	if *rootfs != "" {
		p, err := v1.ParsePlatform(*rootfsPlatform)
		if err != nil {
			return err
		}
		return containerimage.WriteRootfs(ctx, *rootfs, *p, src, *dir)
	}
	var ps []v1.Platform
	for _, s := range strings.Split(*platforms, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		if p.OS == "" || p.Architecture == "" {
			return fmt.Errorf("--platforms %q: each platform is os/architecture, e.g. linux/arm64", *platforms)
		}
		ps = append(ps, *p)
	}
	idx, err := containerimage.Build(ctx, containerimage.Options{Dir: *dir, Source: src, Platforms: ps, Log: os.Stderr})
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("image index %s (version %s, revision %s, created %s)\n", digest, src.Version, src.Revision, src.Created.Format("2006-01-02T15:04:05Z07:00"))
	if *out != "" {
		if err := containerimage.WriteLayout(*out, idx, src.Version); err != nil {
			return err
		}
		fmt.Printf("OCI layout: %s (index.json names it %s)\n", *out, src.Version)
	}
	if *tarPath != "" {
		p, err := v1.ParsePlatform(*tarPlatform)
		if err != nil {
			return err
		}
		ref, err := containerimage.Reference(*tarRef, src.Version)
		if err != nil {
			return err
		}
		tag, ok := ref.(name.Tag)
		if !ok {
			return fmt.Errorf("--tarball-ref %q must be a tag, not a digest", *tarRef)
		}
		if err := containerimage.WriteDockerTarball(*tarPath, idx, *p, tag); err != nil {
			return err
		}
		fmt.Printf("docker archive: %s (%s, %s)\n", *tarPath, tag, p)
	}
	if *push != "" {
		ref, err := containerimage.Reference(*push, src.Version)
		if err != nil {
			return err
		}
		if err := containerimage.Push(ctx, ref, idx); err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", ref, digest)
	}
	return nil
}

// source takes the version, revision and time from the flags, reading what is not given from
// the checkout (VERSION, git): a Docker build stage has no .git and passes all three.
func source(ctx context.Context, dir, version, revision, created string) (containerimage.Source, error) {
	var src containerimage.Source
	var err error
	if version == "" {
		if src.Version, err = containerimage.ReadVersion(dir); err != nil {
			return src, err
		}
	} else if err := containerimage.CheckVersion(version); err != nil {
		return src, fmt.Errorf("--version: %w", err)
	} else {
		src.Version = version
	}
	if src.Revision = revision; revision == "" {
		if src.Revision, err = containerimage.ReadRevision(ctx, dir); err != nil {
			return src, err
		}
	}
	if created == "" {
		src.Created, err = containerimage.ReadCreated(ctx, dir)
	} else {
		src.Created, err = containerimage.ParseEpoch(created)
	}
	return src, err
}
