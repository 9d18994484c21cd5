// wgpu_abi.h — our own declarations of the subset of the webgpu.h C ABI that wgtrain uses,
// written to match the pinned Dawn (npm bun-webgpu-linux-x64@0.1.7, Dawn of June 2025).
// Why our own: the headers found elsewhere describe other Dawn revisions, and this build
// differs from them (docs/architecture.md#the-pinned-dawn-and-its-abi): WGPULimits is 152 bytes (maxImmediateSize replaces the four
// per-stage storage limits), the queue-work-done callback carries a message, and feature ids
// from 0x50006 up are shifted by one. tests/test_wgpu_abi.c checks these against the library.
#ifndef WGT_WGPU_ABI_H
#define WGT_WGPU_ABI_H
#include <stddef.h>
#include <stdint.h>

#define WGPU_STRLEN SIZE_MAX
#define WGPU_WHOLE_SIZE UINT64_MAX
#define WGPU_WHOLE_MAP_SIZE SIZE_MAX

typedef uint32_t WGPUBool;
typedef uint64_t WGPUFlags;

typedef struct WGPUAdapterImpl *WGPUAdapter;
typedef struct WGPUBindGroupImpl *WGPUBindGroup;
typedef struct WGPUBindGroupLayoutImpl *WGPUBindGroupLayout;
typedef struct WGPUBufferImpl *WGPUBuffer;
typedef struct WGPUCommandBufferImpl *WGPUCommandBuffer;
typedef struct WGPUCommandEncoderImpl *WGPUCommandEncoder;
typedef struct WGPUComputePassEncoderImpl *WGPUComputePassEncoder;
typedef struct WGPUComputePipelineImpl *WGPUComputePipeline;
typedef struct WGPUDeviceImpl *WGPUDevice;
typedef struct WGPUInstanceImpl *WGPUInstance;
typedef struct WGPUPipelineLayoutImpl *WGPUPipelineLayout;
typedef struct WGPUQuerySetImpl *WGPUQuerySet;
typedef struct WGPUQueueImpl *WGPUQueue;
typedef struct WGPUShaderModuleImpl *WGPUShaderModule;
typedef struct WGPUSurfaceImpl *WGPUSurface;
typedef struct WGPUSamplerImpl *WGPUSampler;
typedef struct WGPUTextureViewImpl *WGPUTextureView;

// ---- enums (only the values we use; all are 32-bit in the ABI) ----
typedef enum { WGPUAdapterType_DiscreteGPU = 1, WGPUAdapterType_IntegratedGPU = 2, WGPUAdapterType_CPU = 3,
               WGPUAdapterType_Unknown = 4, WGPUAdapterType_Force32 = 0x7FFFFFFF } WGPUAdapterType;
typedef enum { WGPUBackendType_Undefined = 0, WGPUBackendType_Null = 1, WGPUBackendType_WebGPU = 2,
               WGPUBackendType_D3D11 = 3, WGPUBackendType_D3D12 = 4, WGPUBackendType_Metal = 5,
               WGPUBackendType_Vulkan = 6, WGPUBackendType_OpenGL = 7, WGPUBackendType_OpenGLES = 8,
               WGPUBackendType_Force32 = 0x7FFFFFFF } WGPUBackendType;
typedef enum { WGPUCallbackMode_WaitAnyOnly = 1, WGPUCallbackMode_AllowProcessEvents = 2,
               WGPUCallbackMode_AllowSpontaneous = 3, WGPUCallbackMode_Force32 = 0x7FFFFFFF } WGPUCallbackMode;
typedef enum { WGPUCompilationInfoRequestStatus_Success = 1, WGPUCompilationInfoRequestStatus_Force32 = 0x7FFFFFFF } WGPUCompilationInfoRequestStatus;
typedef enum { WGPUCompilationMessageType_Error = 1, WGPUCompilationMessageType_Warning = 2,
               WGPUCompilationMessageType_Info = 3, WGPUCompilationMessageType_Force32 = 0x7FFFFFFF } WGPUCompilationMessageType;
typedef enum { WGPUDeviceLostReason_Unknown = 1, WGPUDeviceLostReason_Destroyed = 2,
               WGPUDeviceLostReason_CallbackCancelled = 3, WGPUDeviceLostReason_FailedCreation = 4,
               WGPUDeviceLostReason_Force32 = 0x7FFFFFFF } WGPUDeviceLostReason;
typedef enum { WGPUErrorType_NoError = 1, WGPUErrorType_Validation = 2, WGPUErrorType_OutOfMemory = 3,
               WGPUErrorType_Internal = 4, WGPUErrorType_Unknown = 5, WGPUErrorType_Force32 = 0x7FFFFFFF } WGPUErrorType;
typedef enum { WGPUFeatureLevel_Undefined = 0, WGPUFeatureLevel_Compatibility = 1, WGPUFeatureLevel_Core = 2,
               WGPUFeatureLevel_Force32 = 0x7FFFFFFF } WGPUFeatureLevel;
typedef enum {
    WGPUFeatureName_TimestampQuery = 0x00000003,
    WGPUFeatureName_ShaderF16 = 0x0000000A,
    WGPUFeatureName_Subgroups = 0x00000011,
    // Dawn-specific ids in this build are one lower than in the April 2025 header
    WGPUFeatureName_ChromiumExperimentalSubgroupMatrix = 0x00050037,
    WGPUFeatureName_Force32 = 0x7FFFFFFF
} WGPUFeatureName;
typedef enum { WGPUMapAsyncStatus_Success = 1, WGPUMapAsyncStatus_Force32 = 0x7FFFFFFF } WGPUMapAsyncStatus;
typedef enum { WGPUPowerPreference_Undefined = 0, WGPUPowerPreference_LowPower = 1,
               WGPUPowerPreference_HighPerformance = 2, WGPUPowerPreference_Force32 = 0x7FFFFFFF } WGPUPowerPreference;
typedef enum { WGPUQueryType_Occlusion = 1, WGPUQueryType_Timestamp = 2, WGPUQueryType_Force32 = 0x7FFFFFFF } WGPUQueryType;
typedef enum { WGPUQueueWorkDoneStatus_Success = 1, WGPUQueueWorkDoneStatus_Force32 = 0x7FFFFFFF } WGPUQueueWorkDoneStatus;
typedef enum { WGPURequestAdapterStatus_Success = 1, WGPURequestAdapterStatus_Force32 = 0x7FFFFFFF } WGPURequestAdapterStatus;
typedef enum { WGPURequestDeviceStatus_Success = 1, WGPURequestDeviceStatus_Force32 = 0x7FFFFFFF } WGPURequestDeviceStatus;
typedef enum { WGPUSType_ShaderSourceWGSL = 0x00000002, WGPUSType_DawnTogglesDescriptor = 0x0005000A,
               WGPUSType_Force32 = 0x7FFFFFFF } WGPUSType;
typedef enum { WGPUStatus_Success = 1, WGPUStatus_Error = 2, WGPUStatus_Force32 = 0x7FFFFFFF } WGPUStatus;
typedef enum { WGPUWaitStatus_Success = 1, WGPUWaitStatus_TimedOut = 2, WGPUWaitStatus_Error = 3,
               WGPUWaitStatus_Force32 = 0x7FFFFFFF } WGPUWaitStatus;

typedef WGPUFlags WGPUBufferUsage;
#define WGPUBufferUsage_MapRead ((WGPUBufferUsage)0x1)
#define WGPUBufferUsage_CopySrc ((WGPUBufferUsage)0x4)
#define WGPUBufferUsage_CopyDst ((WGPUBufferUsage)0x8)
#define WGPUBufferUsage_Uniform ((WGPUBufferUsage)0x40)
#define WGPUBufferUsage_Storage ((WGPUBufferUsage)0x80)
#define WGPUBufferUsage_QueryResolve ((WGPUBufferUsage)0x200)
typedef WGPUFlags WGPUMapMode;
#define WGPUMapMode_Read ((WGPUMapMode)0x1)

// ---- structs ----
typedef struct WGPUStringView { const char *data; size_t length; } WGPUStringView;
typedef struct WGPUChainedStruct { struct WGPUChainedStruct *next; WGPUSType sType; } WGPUChainedStruct;
typedef struct WGPUFuture { uint64_t id; } WGPUFuture;
typedef struct WGPUFutureWaitInfo { WGPUFuture future; WGPUBool completed; } WGPUFutureWaitInfo;

typedef struct WGPUInstanceCapabilities {
    WGPUChainedStruct *nextInChain;
    WGPUBool timedWaitAnyEnable;
    size_t timedWaitAnyMaxCount;
} WGPUInstanceCapabilities;
typedef struct WGPUInstanceDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUInstanceCapabilities capabilities;
} WGPUInstanceDescriptor;

typedef struct WGPUDawnTogglesDescriptor {
    WGPUChainedStruct chain;
    size_t enabledToggleCount;
    const char *const *enabledToggles;
    size_t disabledToggleCount;
    const char *const *disabledToggles;
} WGPUDawnTogglesDescriptor;

typedef struct WGPURequestAdapterOptions {
    WGPUChainedStruct *nextInChain;
    WGPUFeatureLevel featureLevel;
    WGPUPowerPreference powerPreference;
    WGPUBool forceFallbackAdapter;
    WGPUBackendType backendType;
    WGPUSurface compatibleSurface;
} WGPURequestAdapterOptions;

typedef struct WGPUAdapterInfo {
    WGPUChainedStruct *nextInChain;
    WGPUStringView vendor, architecture, device, description;
    WGPUBackendType backendType;
    WGPUAdapterType adapterType;
    uint32_t vendorID, deviceID, subgroupMinSize, subgroupMaxSize;
} WGPUAdapterInfo;

typedef struct WGPULimits {
    WGPUChainedStruct *nextInChain;
    uint32_t maxTextureDimension1D, maxTextureDimension2D, maxTextureDimension3D, maxTextureArrayLayers;
    uint32_t maxBindGroups, maxBindGroupsPlusVertexBuffers, maxBindingsPerBindGroup;
    uint32_t maxDynamicUniformBuffersPerPipelineLayout, maxDynamicStorageBuffersPerPipelineLayout;
    uint32_t maxSampledTexturesPerShaderStage, maxSamplersPerShaderStage;
    uint32_t maxStorageBuffersPerShaderStage, maxStorageTexturesPerShaderStage;
    uint32_t maxUniformBuffersPerShaderStage;
    uint64_t maxUniformBufferBindingSize;
    uint64_t maxStorageBufferBindingSize;
    uint32_t minUniformBufferOffsetAlignment, minStorageBufferOffsetAlignment;
    uint32_t maxVertexBuffers;
    uint64_t maxBufferSize;
    uint32_t maxVertexAttributes, maxVertexBufferArrayStride, maxInterStageShaderVariables;
    uint32_t maxColorAttachments, maxColorAttachmentBytesPerSample;
    uint32_t maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup;
    uint32_t maxComputeWorkgroupSizeX, maxComputeWorkgroupSizeY, maxComputeWorkgroupSizeZ;
    uint32_t maxComputeWorkgroupsPerDimension;
    uint32_t maxImmediateSize;
} WGPULimits;
#define WGT_WGPU_LIMITS_SIZE 152  // what this Dawn writes; checked at compile time and by a test

typedef struct WGPUSupportedFeatures { size_t featureCount; const WGPUFeatureName *features; } WGPUSupportedFeatures;

// callbacks
typedef void (*WGPURequestAdapterCallback)(WGPURequestAdapterStatus, WGPUAdapter, WGPUStringView, void *, void *);
typedef void (*WGPURequestDeviceCallback)(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView, void *, void *);
typedef void (*WGPUDeviceLostCallback)(const WGPUDevice *, WGPUDeviceLostReason, WGPUStringView, void *, void *);
typedef void (*WGPUUncapturedErrorCallback)(const WGPUDevice *, WGPUErrorType, WGPUStringView, void *, void *);
typedef void (*WGPUBufferMapCallback)(WGPUMapAsyncStatus, WGPUStringView, void *, void *);
// this Dawn passes a message to the work-done callback (the April 2025 header does not)
typedef void (*WGPUQueueWorkDoneCallback)(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *);
struct WGPUCompilationInfo;
typedef void (*WGPUCompilationInfoCallback)(WGPUCompilationInfoRequestStatus, const struct WGPUCompilationInfo *, void *, void *);

#define WGT_CALLBACK_INFO(Name, Fn) \
    typedef struct Name { WGPUChainedStruct *nextInChain; WGPUCallbackMode mode; Fn callback; void *userdata1; void *userdata2; } Name
WGT_CALLBACK_INFO(WGPURequestAdapterCallbackInfo, WGPURequestAdapterCallback);
WGT_CALLBACK_INFO(WGPURequestDeviceCallbackInfo, WGPURequestDeviceCallback);
WGT_CALLBACK_INFO(WGPUDeviceLostCallbackInfo, WGPUDeviceLostCallback);
WGT_CALLBACK_INFO(WGPUBufferMapCallbackInfo, WGPUBufferMapCallback);
WGT_CALLBACK_INFO(WGPUQueueWorkDoneCallbackInfo, WGPUQueueWorkDoneCallback);
WGT_CALLBACK_INFO(WGPUCompilationInfoCallbackInfo, WGPUCompilationInfoCallback);
typedef struct WGPUUncapturedErrorCallbackInfo {
    WGPUChainedStruct *nextInChain;  // note: no mode field
    WGPUUncapturedErrorCallback callback;
    void *userdata1, *userdata2;
} WGPUUncapturedErrorCallbackInfo;

typedef struct WGPUCompilationMessage {
    WGPUChainedStruct *nextInChain;
    WGPUStringView message;
    WGPUCompilationMessageType type;
    uint64_t lineNum, linePos, offset, length;
} WGPUCompilationMessage;
typedef struct WGPUCompilationInfo {
    WGPUChainedStruct *nextInChain;
    size_t messageCount;
    const WGPUCompilationMessage *messages;
} WGPUCompilationInfo;

typedef struct WGPUQueueDescriptor { WGPUChainedStruct *nextInChain; WGPUStringView label; } WGPUQueueDescriptor;
typedef struct WGPUDeviceDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    size_t requiredFeatureCount;
    const WGPUFeatureName *requiredFeatures;
    const WGPULimits *requiredLimits;
    WGPUQueueDescriptor defaultQueue;
    WGPUDeviceLostCallbackInfo deviceLostCallbackInfo;
    WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
} WGPUDeviceDescriptor;

typedef struct WGPUBufferDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUBufferUsage usage;
    uint64_t size;
    WGPUBool mappedAtCreation;
} WGPUBufferDescriptor;

typedef struct WGPUBindGroupEntry {
    WGPUChainedStruct *nextInChain;
    uint32_t binding;
    WGPUBuffer buffer;
    uint64_t offset;
    uint64_t size;
    WGPUSampler sampler;
    WGPUTextureView textureView;
} WGPUBindGroupEntry;
typedef struct WGPUBindGroupDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUBindGroupLayout layout;
    size_t entryCount;
    const WGPUBindGroupEntry *entries;
} WGPUBindGroupDescriptor;

typedef struct WGPUShaderSourceWGSL { WGPUChainedStruct chain; WGPUStringView code; } WGPUShaderSourceWGSL;
typedef struct WGPUShaderModuleDescriptor { WGPUChainedStruct *nextInChain; WGPUStringView label; } WGPUShaderModuleDescriptor;
typedef struct WGPUConstantEntry { WGPUChainedStruct *nextInChain; WGPUStringView key; double value; } WGPUConstantEntry;
typedef struct WGPUComputeState {
    WGPUChainedStruct *nextInChain;
    WGPUShaderModule module;
    WGPUStringView entryPoint;
    size_t constantCount;
    const WGPUConstantEntry *constants;
} WGPUComputeState;
typedef struct WGPUComputePipelineDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUPipelineLayout layout;  // NULL: layout derived from the shader
    WGPUComputeState compute;
} WGPUComputePipelineDescriptor;

typedef struct WGPUPassTimestampWrites {
    WGPUChainedStruct *nextInChain;
    WGPUQuerySet querySet;
    uint32_t beginningOfPassWriteIndex, endOfPassWriteIndex;
} WGPUPassTimestampWrites;
typedef struct WGPUComputePassDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    const WGPUPassTimestampWrites *timestampWrites;
} WGPUComputePassDescriptor;
typedef struct WGPUCommandEncoderDescriptor { WGPUChainedStruct *nextInChain; WGPUStringView label; } WGPUCommandEncoderDescriptor;
typedef struct WGPUCommandBufferDescriptor { WGPUChainedStruct *nextInChain; WGPUStringView label; } WGPUCommandBufferDescriptor;
typedef struct WGPUQuerySetDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUQueryType type;
    uint32_t count;
} WGPUQuerySetDescriptor;

// ---- functions ----
WGPUInstance wgpuCreateInstance(const WGPUInstanceDescriptor *);
WGPUFuture wgpuInstanceRequestAdapter(WGPUInstance, const WGPURequestAdapterOptions *, WGPURequestAdapterCallbackInfo);
WGPUWaitStatus wgpuInstanceWaitAny(WGPUInstance, size_t, WGPUFutureWaitInfo *, uint64_t timeoutNS);
void wgpuInstanceProcessEvents(WGPUInstance);
void wgpuInstanceRelease(WGPUInstance);

WGPUStatus wgpuAdapterGetInfo(WGPUAdapter, WGPUAdapterInfo *);
void wgpuAdapterInfoFreeMembers(WGPUAdapterInfo);
WGPUStatus wgpuAdapterGetLimits(WGPUAdapter, WGPULimits *);
WGPUBool wgpuAdapterHasFeature(WGPUAdapter, WGPUFeatureName);
void wgpuAdapterGetFeatures(WGPUAdapter, WGPUSupportedFeatures *);
void wgpuSupportedFeaturesFreeMembers(WGPUSupportedFeatures);
WGPUFuture wgpuAdapterRequestDevice(WGPUAdapter, const WGPUDeviceDescriptor *, WGPURequestDeviceCallbackInfo);
void wgpuAdapterRelease(WGPUAdapter);

WGPUQueue wgpuDeviceGetQueue(WGPUDevice);
WGPUStatus wgpuDeviceGetLimits(WGPUDevice, WGPULimits *);
WGPUBuffer wgpuDeviceCreateBuffer(WGPUDevice, const WGPUBufferDescriptor *);
WGPUShaderModule wgpuDeviceCreateShaderModule(WGPUDevice, const WGPUShaderModuleDescriptor *);
WGPUComputePipeline wgpuDeviceCreateComputePipeline(WGPUDevice, const WGPUComputePipelineDescriptor *);
WGPUBindGroup wgpuDeviceCreateBindGroup(WGPUDevice, const WGPUBindGroupDescriptor *);
WGPUCommandEncoder wgpuDeviceCreateCommandEncoder(WGPUDevice, const WGPUCommandEncoderDescriptor *);
WGPUQuerySet wgpuDeviceCreateQuerySet(WGPUDevice, const WGPUQuerySetDescriptor *);
void wgpuDeviceDestroy(WGPUDevice);
void wgpuDeviceRelease(WGPUDevice);

WGPUFuture wgpuShaderModuleGetCompilationInfo(WGPUShaderModule, WGPUCompilationInfoCallbackInfo);
void wgpuShaderModuleRelease(WGPUShaderModule);
WGPUBindGroupLayout wgpuComputePipelineGetBindGroupLayout(WGPUComputePipeline, uint32_t);
void wgpuComputePipelineRelease(WGPUComputePipeline);
void wgpuBindGroupLayoutRelease(WGPUBindGroupLayout);
void wgpuBindGroupRelease(WGPUBindGroup);

WGPUComputePassEncoder wgpuCommandEncoderBeginComputePass(WGPUCommandEncoder, const WGPUComputePassDescriptor *);
void wgpuCommandEncoderCopyBufferToBuffer(WGPUCommandEncoder, WGPUBuffer, uint64_t, WGPUBuffer, uint64_t, uint64_t);
void wgpuCommandEncoderClearBuffer(WGPUCommandEncoder, WGPUBuffer, uint64_t offset, uint64_t size);
void wgpuCommandEncoderResolveQuerySet(WGPUCommandEncoder, WGPUQuerySet, uint32_t first, uint32_t count, WGPUBuffer, uint64_t);
void wgpuCommandEncoderWriteTimestamp(WGPUCommandEncoder, WGPUQuerySet, uint32_t);
WGPUCommandBuffer wgpuCommandEncoderFinish(WGPUCommandEncoder, const WGPUCommandBufferDescriptor *);
void wgpuCommandEncoderRelease(WGPUCommandEncoder);
void wgpuCommandBufferRelease(WGPUCommandBuffer);

void wgpuComputePassEncoderSetPipeline(WGPUComputePassEncoder, WGPUComputePipeline);
void wgpuComputePassEncoderSetBindGroup(WGPUComputePassEncoder, uint32_t, WGPUBindGroup, size_t, const uint32_t *);
void wgpuComputePassEncoderDispatchWorkgroups(WGPUComputePassEncoder, uint32_t, uint32_t, uint32_t);
void wgpuComputePassEncoderWriteTimestamp(WGPUComputePassEncoder, WGPUQuerySet, uint32_t);
void wgpuComputePassEncoderEnd(WGPUComputePassEncoder);
void wgpuComputePassEncoderRelease(WGPUComputePassEncoder);

void wgpuQueueSubmit(WGPUQueue, size_t, const WGPUCommandBuffer *);
void wgpuQueueWriteBuffer(WGPUQueue, WGPUBuffer, uint64_t, const void *, size_t);
WGPUFuture wgpuQueueOnSubmittedWorkDone(WGPUQueue, WGPUQueueWorkDoneCallbackInfo);
void wgpuQueueRelease(WGPUQueue);

WGPUFuture wgpuBufferMapAsync(WGPUBuffer, WGPUMapMode, size_t offset, size_t size, WGPUBufferMapCallbackInfo);
const void *wgpuBufferGetConstMappedRange(WGPUBuffer, size_t offset, size_t size);
void wgpuBufferUnmap(WGPUBuffer);
void wgpuBufferDestroy(WGPUBuffer);
void wgpuBufferRelease(WGPUBuffer);
void wgpuQuerySetRelease(WGPUQuerySet);

_Static_assert(sizeof(WGPULimits) == WGT_WGPU_LIMITS_SIZE, "WGPULimits must match the pinned Dawn");
#endif
