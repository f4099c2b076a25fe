"""REST paths of built-in and custom resources."""

from __future__ import annotations

import pytest

from kube_reloader.kube import resources
from kube_reloader.kube.resources import Resource


@pytest.mark.parametrize(
    ("resource", "namespace", "name", "sub", "path"),
    [
        (resources.CONFIGMAPS, None, None, None, "/api/v1/configmaps"),
        (resources.CONFIGMAPS, "ns", None, None, "/api/v1/namespaces/ns/configmaps"),
        (resources.SECRETS, "ns", "s", None, "/api/v1/namespaces/ns/secrets/s"),
        (resources.DEPLOYMENTS, "ns", "d", "status", "/apis/apps/v1/namespaces/ns/deployments/d/status"),
        (resources.NODES, None, "n1", None, "/api/v1/nodes/n1"),
        (Resource("argoproj.io", "v1alpha1", "rollouts", "Rollout"), "a", "r", None,
         "/apis/argoproj.io/v1alpha1/namespaces/a/rollouts/r"),
        (resources.CONFIGMAPS, "ns", "a b/c", None, "/api/v1/namespaces/ns/configmaps/a%20b%2Fc"),
    ],
    ids=["all namespaces", "one namespace", "one object", "subresource", "cluster scoped",
         "custom resource", "names are escaped"],
)  # fmt: skip
def test_paths(
    resource: Resource, namespace: str | None, name: str | None, sub: str | None, path: str
) -> None:
    assert resource.path(namespace, name, sub) == path


def test_a_namespaced_object_without_a_namespace_is_refused() -> None:
    with pytest.raises(ValueError, match="Deployment 'd' is namespaced"):
        resources.DEPLOYMENTS.path(None, "d")


def test_api_version_and_display_name() -> None:
    assert resources.DEPLOYMENTS.api_version == "apps/v1"
    assert resources.CONFIGMAPS.api_version == "v1"
    assert str(resources.DEPLOYMENTS) == "deployments.apps"
    assert str(resources.SECRETS) == "secrets"
