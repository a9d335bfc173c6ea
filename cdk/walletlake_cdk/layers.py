"""ARNs of the AWS-published Lambda layers the functions run on, per region.

Two layers carry the heavy dependencies, so nothing is bundled with Docker:

- **Powertools for AWS Lambda (Python) v3**, documented format
  ``arn:aws:lambda:{region}:017000801446:layer:AWSLambdaPowertoolsPythonV3-{python}-{arch}:{version}``
  (docs.powertools.aws.dev/lambda/python, "Lambda Layer"). One account and one version number
  serve every commercial region, so the ARN is built from the deployment region.
- **AWS SDK for pandas** (awswrangler, pandas, pyarrow, numpy), documented format
  ``arn:aws:lambda:{region}:{account}:layer:AWSSDKPandas-Python{python}:{version}``
  (aws-sdk-pandas.readthedocs.io, "AWS Lambda Managed Layers"). Opt-in regions are published from
  their own accounts and the layer version differs per region, so the ARNs are a table, copied
  from that page for release 3.17.0, Python 3.11, x86_64.

An environment-agnostic stack resolves the pandas ARN at deploy time with a CloudFormation mapping
keyed on ``AWS::Region``; a stack with a concrete region resolves it at synth time and fails early
for a region the layer is not published in. The context keys ``powertools_layer_arn`` and
``pandas_layer_arn`` override both (other partitions, newer releases).
"""

from __future__ import annotations

from typing import Final

#: Lambda runtime and architecture every function and layer here is built for.
PYTHON_TAG: Final = "python311"
ARCHITECTURE: Final = "x86_64"

POWERTOOLS_ACCOUNT: Final = "017000801446"
#: Layer version 27 is Powertools for AWS Lambda (Python) 3.23.0.
POWERTOOLS_LAYER_VERSION: Final = 27

#: SDK for pandas release whose layer ARNs are listed below.
PANDAS_RELEASE: Final = "3.17.0"
_PANDAS_ACCOUNT: Final = "336392948345"
_PANDAS_LAYER: Final = "AWSSDKPandas-Python311"

#: region → (publishing account, layer version) of ``AWSSDKPandas-Python311`` (x86_64), release 3.17.0.
_PANDAS_LAYERS: Final[dict[str, tuple[str, int]]] = {
    "af-south-1": (_PANDAS_ACCOUNT, 32),
    "ap-northeast-1": (_PANDAS_ACCOUNT, 33),
    "ap-northeast-2": (_PANDAS_ACCOUNT, 33),
    "ap-northeast-3": (_PANDAS_ACCOUNT, 33),
    "ap-south-1": (_PANDAS_ACCOUNT, 33),
    "ap-southeast-1": (_PANDAS_ACCOUNT, 33),
    "ap-southeast-2": (_PANDAS_ACCOUNT, 33),
    "ca-central-1": (_PANDAS_ACCOUNT, 33),
    "eu-central-1": (_PANDAS_ACCOUNT, 33),
    "eu-north-1": (_PANDAS_ACCOUNT, 33),
    "eu-west-1": (_PANDAS_ACCOUNT, 33),
    "eu-west-2": (_PANDAS_ACCOUNT, 33),
    "eu-west-3": (_PANDAS_ACCOUNT, 33),
    "sa-east-1": (_PANDAS_ACCOUNT, 33),
    "us-east-1": (_PANDAS_ACCOUNT, 33),
    "us-east-2": (_PANDAS_ACCOUNT, 33),
    "us-west-1": (_PANDAS_ACCOUNT, 33),
    "us-west-2": (_PANDAS_ACCOUNT, 33),
    "ap-east-1": ("839552336658", 32),
    "ap-south-2": ("246107603503", 31),
    "ap-southeast-3": ("258944054355", 32),
    "ap-southeast-4": ("945386623051", 31),
    "ca-west-1": ("941713567376", 3),
    "eu-central-2": ("956415814219", 31),
    "eu-south-1": ("774444163449", 32),
    "eu-south-2": ("982086096842", 31),
    "il-central-1": ("263840725265", 30),
    "me-central-1": ("593833071574", 30),
}


def pandas_layer_arn(region: str, partition: str = "aws") -> str:
    """The SDK for pandas layer ARN of a region.

    Examples
    --------
    >>> pandas_layer_arn("eu-west-1")
    'arn:aws:lambda:eu-west-1:336392948345:layer:AWSSDKPandas-Python311:33'
    """
    try:
        account, version = _PANDAS_LAYERS[region]
    except KeyError:
        raise ValueError(
            f"the AWS SDK for pandas {PANDAS_RELEASE} layer is not published in {region!r}; "
            "pass its ARN with -c pandas_layer_arn=..."
        ) from None
    return f"arn:{partition}:lambda:{region}:{account}:layer:{_PANDAS_LAYER}:{version}"


def powertools_layer_arn(region: str, partition: str = "aws") -> str:
    """The Powertools for AWS Lambda (Python) v3 layer ARN of a region (``region`` may be a token).

    Examples
    --------
    >>> powertools_layer_arn("us-east-1")
    'arn:aws:lambda:us-east-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python311-x86_64:27'
    """
    return (
        f"arn:{partition}:lambda:{region}:{POWERTOOLS_ACCOUNT}:layer:"
        f"AWSLambdaPowertoolsPythonV3-{PYTHON_TAG}-{ARCHITECTURE}:{POWERTOOLS_LAYER_VERSION}"
    )


#: Every region's SDK for pandas layer ARN (what the CloudFormation mapping holds).
PANDAS_LAYER_ARNS: Final[dict[str, str]] = {region: pandas_layer_arn(region) for region in _PANDAS_LAYERS}
