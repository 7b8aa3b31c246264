"""The modern stdio front: `mrtr-bridge stdio`, launched by a local client."""
