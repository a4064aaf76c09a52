"""What a node printed to its console, through EC2's ``GetConsoleOutput``.

The driver's ``ConsoleOutput`` ability: when a node stops or vanishes while it starts, or
does not run within ``provision_timeout``, the cloud template appends the last lines of
this to the error. On EC2 those are cloud-init's (it copies the user-data script's output,
the bootstrap's ``skyward bootstrap: ...`` lines included, to the serial console), so the
user reads why the node went away instead of a bare ``terminated``.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from skyward_aws.session import refused_credentials


def read_console(ec2: Any, instance_id: str) -> str:
    """Everything ``instance_id`` printed so far (EC2 keeps the last 64 KiB); ``""`` when
    EC2 has nothing yet. botocore decodes the answer's base64 ``Output`` itself.

    ``Latest=True`` asks for the console as it is now, which only Nitro instance types
    offer; an instance EC2 refuses it for (an older Xen type) is asked again without it,
    for the copy EC2 posts at each state change (a start, a stop, a terminate: what a node
    that failed to start has). Credentials that may not read it are not asked twice."""
    try:
        answer = ec2.get_console_output(InstanceId=instance_id, Latest=True)
    except ClientError as error:
        if refused_credentials(error):
            raise
        answer = ec2.get_console_output(InstanceId=instance_id)
    return str(answer.get("Output") or "")
