"""Azure ML jobs as azure-ai-ml builds them from the REST resource, for tests."""


def rest_job(name, status, created, modified, instances=2, compute="gpu-cluster", **tags):
    """A Command job as MLClient.jobs.get returns it: azure-ai-ml's `Job._from_rest_object` of
    the REST job resource (azure-rest-api-specs machinelearningservices stable 2025-12-01,
    examples/Job/CommandJob/get.json at 54036fc: its fields, with values of our own)."""
    from azure.ai.ml._restclient.arm_ml_service.models import JobBase
    from azure.ai.ml.entities import Job

    workspace = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.MachineLearningServices"
    body = {
        "id": f"{workspace}/workspaces/w/jobs/{name}", "name": name,
        "type": "Microsoft.MachineLearningServices/workspaces/jobs",
        "properties": {
            "tags": {"azdl.framework": "torch"} | tags, "properties": {}, "displayName": name,
            "status": status, "experimentName": "azdl", "jobType": "Command",
            "computeId": f"{workspace}/workspaces/w/computes/{compute}",
            "resources": {"instanceCount": instances}, "command": "python -m training.guard",
            "environmentId": "azureml:azdl-torch:1",
            "limits": {"timeout": "PT24H", "jobLimitsType": "Command"},
            # as azdl submit names it (azdl.jobs.azureml.output_folder): the outputs datastore
            "outputs": {"logs": {
                "jobOutputType": "uri_folder", "mode": "ReadWriteMount",
                "uri": f"azureml://datastores/azdl_outputs/paths/azdl/{name}/logs/"}},
        },
        "systemData": {
            "createdAt": created.isoformat(), "createdBy": "u", "createdByType": "User",
            "lastModifiedAt": modified.isoformat(), "lastModifiedBy": "u",
            "lastModifiedByType": "User",
        },
    }  # fmt: skip
    return Job._from_rest_object(JobBase(body))
