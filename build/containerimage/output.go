package containerimage

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteLayout replaces dir with an OCI image layout holding idx, named tag in index.json.
func WriteLayout(dir string, idx v1.ImageIndex, tag string) error {
	// layout.Write appends to an existing index.json; start empty so the layout holds one image.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{AnnotationRefName: tag}))
}

// ReadLayout returns the image index named tag in the OCI layout at dir.
func ReadLayout(dir, tag string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Annotations[AnnotationRefName] == tag {
			return top.ImageIndex(d.Digest)
		}
	}
	return nil, fmt.Errorf("%s: no image named %q", dir, tag)
}

// Reference parses an image reference; one without a tag or digest gets version as its tag.
func Reference(ref, version string) (name.Reference, error) {
	r, err := name.ParseReference(ref, name.WithDefaultTag(version))
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if t, ok := r.(name.Tag); ok {
		return t.Context().Tag(t.TagStr()), nil // String() then shows the tag it got
	}
	return r, nil
}

// Push uploads idx to ref with the credentials of the Docker config (~/.docker/config.json,
// credential helpers). Loopback and private registries are spoken to over plain HTTP.
func Push(ctx context.Context, ref name.Reference, idx v1.ImageIndex) error {
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// WriteDockerTarball writes the platform p image of idx as a `docker save` archive tagged
// ref, the input of `kind load image-archive` and `docker load`.
func WriteDockerTarball(path string, idx v1.ImageIndex, p v1.Platform, ref name.Tag) error {
	img, err := PlatformImage(idx, p)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, ref, img)
}

// PlatformImage returns the image of idx for p.
func PlatformImage(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the image index has no %s image", p)
}
