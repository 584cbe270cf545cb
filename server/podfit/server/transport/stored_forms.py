"""The stored form of cached objects is the transport's wire format: a serialized ``podfit.v1`` ClusterObject,
as Get and List return it. A reservation changes it as it changes the record (``podfit.server.reserver``)."""

from __future__ import annotations

from podfit.server.model.dra import ResourceClaim
from podfit.v1 import cluster_cache_pb2 as cc


class ProtobufForms:
    """``StoredForms`` over serialized ClusterObjects."""

    def bound(self, source: bytes, node_name: str) -> bytes:
        """A pod's stored form (a serialized ClusterObject) bound to ``node_name``, as a reservation."""
        obj = cc.ClusterObject()
        obj.ParseFromString(source)
        obj.pod.spec.node_name = node_name
        obj.pod.status.nominated_node_name = ""
        return obj.SerializeToString(deterministic=True)

    def claim(self, source: bytes, claim: ResourceClaim) -> bytes:
        """A claim's stored form (a serialized ClusterObject) with ``claim``'s allocation and reservations."""
        obj = cc.ClusterObject()
        obj.ParseFromString(source)
        status = obj.resource_claim.status
        if claim.allocation is not None and not status.HasField("allocation"):
            status.allocation.devices.SetInParent()
            for device in claim.allocation:
                result = status.allocation.devices.results.add(
                    request=device.request, driver=device.driver, pool=device.pool, device=device.device
                )
                if device.admin_access:
                    result.admin_access = True
            for term in claim.allocation_node_selector or ():
                added = status.allocation.node_selector.node_selector_terms.add()
                for target, requirements in (
                    (added.match_expressions, term.match_expressions),
                    (added.match_fields, term.match_fields),
                ):
                    for req in requirements:
                        target.add(key=req.key, operator=req.operator, values=list(req.values))
        known = {ref.uid for ref in status.reserved_for}
        for resource, name, uid in claim.reserved_for:
            if uid not in known:
                status.reserved_for.add(resource=resource, name=name, uid=uid)
        return obj.SerializeToString(deterministic=True)


PROTOBUF_FORMS = ProtobufForms()
